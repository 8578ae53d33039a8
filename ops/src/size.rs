//! Sizes and limits on the command line: `1048576`, `10KiB`, `5MiB`, `1.5GiB`, `2GB`, `unlimited`.

/// A quota or rate value: a number, or no limit (`null` in the admin API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    Unlimited,
    Value(u64),
}

impl Limit {
    /// The admin API's encoding: an integer, or `null` for unlimited.
    pub(crate) fn to_json(self) -> serde_json::Value {
        match self {
            Limit::Unlimited => serde_json::Value::Null,
            Limit::Value(n) => n.into(),
        }
    }

    /// The limit as the admin API's types hold it: `None` = unlimited.
    pub(crate) fn value(self) -> Option<u64> {
        match self {
            Limit::Unlimited => None,
            Limit::Value(n) => Some(n),
        }
    }

    /// A patch field: absent (`None`) when not given, else the limit.
    pub(crate) fn patch(limit: Option<Limit>) -> Option<Option<u64>> {
        limit.map(Limit::value)
    }
}

fn is_unlimited(s: &str) -> bool {
    s.trim().eq_ignore_ascii_case("unlimited")
}

/// A byte size: plain bytes, or a number with a unit. Binary units (`KiB`, `MiB`, `GiB`, `TiB`,
/// `PiB`, `EiB`, and the short `K`, `M`, `G`, `T`, `P`, `E`) are powers of 1024; decimal units
/// (`kB`, `MB`, `GB`, `TB`, `PB`, `EB`) powers of 1000; `B` is bytes. Case-insensitive; a space
/// may separate the number and the unit; a fraction (`1.5GiB`) must come to whole bytes.
pub(crate) fn parse_size(input: &str) -> Result<u64, String> {
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (&s[..split], s[split..].trim());
    if number.is_empty() {
        return Err(format!(
            "invalid size {input:?}: expected bytes or a number with a unit (10KiB, 5MiB, 1GiB), or unlimited"
        ));
    }
    let multiplier: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        "p" | "pi" | "pib" => 1 << 50,
        "e" | "ei" | "eib" => 1 << 60,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        "eb" => 1_000_000_000_000_000_000,
        _ => {
            return Err(format!(
            "invalid size {input:?}: unknown unit {unit:?} (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
        ))
        }
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return Err(format!("invalid size {input:?}: not a number"));
    }
    let too_big = || format!("invalid size {input:?}: too large");
    let parse = |digits: &str| -> Result<u128, String> {
        if digits.is_empty() {
            Ok(0)
        } else {
            digits.parse::<u128>().map_err(|_| too_big())
        }
    };
    if fraction.len() > 18 {
        return Err(format!("invalid size {input:?}: too many decimals"));
    }
    let scale = 10u128.pow(fraction.len() as u32);
    let w = parse(whole)?.checked_mul(multiplier).ok_or_else(too_big)?;
    // At most 18 digits times at most 2^60: no overflow in u128.
    let f = parse(fraction)? * multiplier;
    if f % scale != 0 {
        return Err(format!(
            "invalid size {input:?}: not a whole number of bytes"
        ));
    }
    let total = w.checked_add(f / scale).ok_or_else(too_big)?;
    u64::try_from(total).map_err(|_| too_big())
}

/// A size limit: [`parse_size`], or `unlimited`.
pub(crate) fn parse_size_limit(input: &str) -> Result<Limit, String> {
    if is_unlimited(input) {
        return Ok(Limit::Unlimited);
    }
    parse_size(input).map(Limit::Value)
}

/// A count limit: a non-negative integer, or `unlimited`.
pub(crate) fn parse_count_limit(input: &str) -> Result<Limit, String> {
    if is_unlimited(input) {
        return Ok(Limit::Unlimited);
    }
    input.trim().parse::<u64>().map(Limit::Value).map_err(|_| {
        format!("invalid number {input:?}: expected a non-negative integer or unlimited")
    })
}

/// `1234` → `1.2 KiB` (bytes below 1 KiB as `N B`).
pub(crate) fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_bytes_and_units() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("10KiB"), Ok(10 * 1024));
        assert_eq!(parse_size("5MiB"), Ok(5 * 1024 * 1024));
        assert_eq!(parse_size("1GiB"), Ok(1_073_741_824));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("1PiB"), Ok(1 << 50));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        assert_eq!(parse_size(" 3k "), Ok(3072));
        assert_eq!(parse_size("1kB"), Ok(1000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size(".5KiB"), Ok(512));
        assert_eq!(parse_size("15EiB"), Ok(15 << 60));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn bad_sizes() {
        for bad in [
            "",
            "GiB",
            "-1",
            "1.2.3",
            ".",
            "10 XB",
            "1.1B",
            "0.3KiB",
            "16EiB",
            "18446744073709551616",
            "99999999999999999999999999999999999999999999",
            "1e9",
            "unlimited",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn limits() {
        assert_eq!(parse_size_limit("unlimited"), Ok(Limit::Unlimited));
        assert_eq!(parse_size_limit("Unlimited"), Ok(Limit::Unlimited));
        assert_eq!(parse_size_limit("1MiB"), Ok(Limit::Value(1 << 20)));
        assert_eq!(parse_count_limit("10"), Ok(Limit::Value(10)));
        assert_eq!(parse_count_limit("unlimited"), Ok(Limit::Unlimited));
        assert!(parse_count_limit("10KiB").is_err());
        assert!(parse_count_limit("-1").is_err());
        assert_eq!(Limit::Unlimited.to_json(), serde_json::Value::Null);
        assert_eq!(Limit::Value(7).to_json(), serde_json::json!(7));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1234), "1.2 KiB");
        assert_eq!(format_size(1 << 30), "1.0 GiB");
        assert_eq!(format_size(u64::MAX), "16.0 EiB");
    }
}
