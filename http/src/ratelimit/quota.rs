//! GCRA quotas from the configured rates.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::Quota;

/// A GCRA quota of `rps` requests per second (fractional allowed) with `burst` at once.
/// `None` when `rps` is 0 (no limit) or not a usable number.
pub(super) fn quota(rps: f64, burst: u32) -> Option<Quota> {
    if !(rps.is_finite() && rps > 0.0) {
        return None;
    }
    let period = Duration::try_from_secs_f64(1.0 / rps).ok()?;
    let burst = NonZeroU32::new(burst.max(1))?;
    Some(Quota::with_period(period)?.allow_burst(burst))
}
