//! What a command prints: every command returns a [`Report`], shown as text (tables, one-line
//! summaries) or, with `-o json`, as JSON (the admin API's answer, keys sorted).

use serde::Serialize;

use crate::cli::Output;
use crate::size::format_size;

/// A command's answer as text for the operator.
pub(crate) trait Text {
    fn text(&self) -> String;
}

/// A command's result that knows how to print itself.
pub(crate) trait Report {
    fn text(&self) -> String;
    fn json(&self) -> serde_json::Result<serde_json::Value>;
}

impl<T: Text + Serialize> Report for T {
    fn text(&self) -> String {
        Text::text(self)
    }

    fn json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(self)
    }
}

/// Prints `report` as `output` asks.
pub(crate) fn emit(report: &dyn Report, output: Output) -> anyhow::Result<()> {
    match output {
        // Through `Value`: keys sorted, as seedctl has always printed them.
        Output::Json => println!("{}", serde_json::to_string_pretty(&report.json()?)?),
        Output::Text => println!("{}", report.text()),
    }
    Ok(())
}

/// A list of strings as `a, b`; `-` when empty.
pub(crate) fn join<T: AsRef<str>>(items: &[T]) -> String {
    if items.is_empty() {
        return "-".to_owned();
    }
    items
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(", ")
}

/// An optional string, `-` when absent.
pub(crate) fn or_dash(v: Option<&str>) -> &str {
    v.unwrap_or("-")
}

/// `used/limit`, with sizes in human units.
pub(crate) fn used_of(used: Option<u64>, limit: Option<u64>, size: bool) -> String {
    let used = match used {
        Some(n) if size => format_size(n),
        Some(n) => n.to_string(),
        None => "-".to_owned(),
    };
    let limit = if size {
        limit_size(limit)
    } else {
        limit_count(limit)
    };
    format!("{used}/{limit}")
}

pub(crate) fn limit_count<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
}

pub(crate) fn limit_size(v: Option<u64>) -> String {
    v.map_or_else(|| "unlimited".to_owned(), format_size)
}

/// A tenant's HTTP rate limit.
pub(crate) fn rate_text(r: &seedd_api::Rate) -> String {
    if r.requests_per_second.is_none() && r.burst.is_none() {
        return "unlimited".to_owned();
    }
    format!(
        "{} req/s, burst {}",
        limit_count(r.requests_per_second),
        limit_count(r.burst)
    )
}

/// The line under a paged listing: nothing when it is complete; otherwise how many of how
/// many rows were shown and the flag that continues.
pub(crate) fn page_footer(shown: usize, total: usize, next: Option<&str>) -> String {
    match next {
        Some(cursor) => format!("\n({shown} of {total} shown; more with --after {cursor})"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_cells() {
        assert_eq!(used_of(Some(1), Some(10), false), "1/10");
        assert_eq!(used_of(Some(1234), None, true), "1.2 KiB/unlimited");
        assert_eq!(used_of(None, Some(1u64 << 30), true), "-/1.0 GiB");
    }
}
