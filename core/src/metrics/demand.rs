//! Per-repository demand: how often each repository is asked for (pack requests over HTTP,
//! git streams over Radicle), decayed exponentially (half-life [`HALF_LIFE_SECS`]) so that old
//! popularity fades. Not exported to Prometheus (a label per repository would be unbounded);
//! an identity whose inventory is over its cap announces the most wanted repositories first
//! (`identity::announce`).

use std::collections::HashMap;
use std::sync::Mutex;

use seedd_proto::crypto::RepoId;

/// A request counts half after this long.
pub const HALF_LIFE_SECS: u64 = 7 * 24 * 3600;

/// Scores below this are forgotten (one request, about 10 half-lives ago): the map holds the
/// repositories asked for in the last months, not every one ever asked for (purged ones too).
const FORGET_BELOW: f64 = 1.0 / 1024.0;
/// Every this many records, the scores that decayed below [`FORGET_BELOW`] are dropped
/// (amortised: one pass over the map per this many requests).
const SWEEP_EVERY: u64 = 4096;

/// Decayed request counts per repository. Shared by every identity and transport.
#[derive(Default)]
pub struct Demand {
    /// Score at the time of its last update, and that time (Unix seconds).
    scores: Mutex<HashMap<RepoId, (f64, u64)>>,
    records: std::sync::atomic::AtomicU64,
}

fn decayed(score: f64, from: u64, to: u64) -> f64 {
    let age = to.saturating_sub(from) as f64;
    score * (-age / HALF_LIFE_SECS as f64).exp2()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Demand {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RepoId, (f64, u64)>> {
        self.scores.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One request for `rid` now.
    pub fn record(&self, rid: RepoId) {
        self.record_at(rid, now_secs());
    }

    /// One request for `rid` at `now` (Unix seconds).
    pub fn record_at(&self, rid: RepoId, now: u64) {
        let mut scores = self.lock();
        let entry = scores.entry(rid).or_insert((0.0, now));
        *entry = (decayed(entry.0, entry.1, now) + 1.0, now.max(entry.1));
        let n = self
            .records
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % SWEEP_EVERY == SWEEP_EVERY - 1 {
            scores.retain(|_, (score, at)| decayed(*score, *at, now) >= FORGET_BELOW);
        }
    }

    /// How many repositories have a score.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// The decayed request count of each of `rids` at `now` (0 for one never asked for).
    pub fn scores_at(&self, rids: &[RepoId], now: u64) -> Vec<f64> {
        let scores = self.lock();
        rids.iter()
            .map(|rid| {
                scores
                    .get(rid)
                    .map_or(0.0, |(score, at)| decayed(*score, *at, now))
            })
            .collect()
    }

    /// Forget repositories no longer held (keeps the map as large as storage).
    pub fn retain(&self, keep: impl Fn(&RepoId) -> bool) {
        self.lock().retain(|rid, _| keep(rid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_add_up_and_halve_every_half_life() {
        let d = Demand::default();
        let a = RepoId::from_oid_bytes([1; 20]);
        let b = RepoId::from_oid_bytes([2; 20]);
        let t = 1_000_000;
        for _ in 0..4 {
            d.record_at(a, t);
        }
        assert_eq!(d.scores_at(&[a, b], t), vec![4.0, 0.0]);
        let later = d.scores_at(&[a], t + HALF_LIFE_SECS)[0];
        assert!((later - 2.0).abs() < 1e-9, "{later}");
        d.record_at(a, t + HALF_LIFE_SECS);
        let now = d.scores_at(&[a], t + HALF_LIFE_SECS)[0];
        assert!((now - 3.0).abs() < 1e-9, "{now}");
        // A clock step backwards does not inflate the score.
        d.record_at(a, t);
        assert!(d.scores_at(&[a], t + HALF_LIFE_SECS)[0] <= 4.0 + 1e-9);
        d.retain(|r| *r != a);
        assert_eq!(d.scores_at(&[a], t), vec![0.0]);
    }

    #[test]
    fn scores_that_decayed_away_are_forgotten() {
        let d = Demand::default();
        let t = 1_000_000;
        for n in 0..100u8 {
            d.record_at(RepoId::from_oid_bytes([n; 20]), t);
        }
        let hot = RepoId::from_oid_bytes([200; 20]);
        let later = t + 11 * HALF_LIFE_SECS;
        // Requests for one repository only, long after: the sweep drops the others.
        for _ in 0..SWEEP_EVERY {
            d.record_at(hot, later);
        }
        assert_eq!(d.len(), 1);
        assert!(d.scores_at(&[hot], later)[0] > 1000.0);
    }
}
