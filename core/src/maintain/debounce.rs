//! After-fetch triggers, debounced per repository: a repository that is fetched again and
//! again is looked at once it has been quiet for `quiet`, but at the latest `max_wait` after
//! its first fetch since it was last looked at (a busy repository still gets maintained).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use seedd_proto::crypto::RepoId;

pub(crate) struct Debouncer {
    quiet: Duration,
    max_wait: Duration,
    /// Repository → (first, latest) trigger since it was last taken.
    pending: HashMap<RepoId, (Instant, Instant)>,
}

impl Debouncer {
    pub(crate) fn new(quiet: Duration) -> Self {
        Self {
            quiet,
            max_wait: quiet * 10,
            pending: HashMap::new(),
        }
    }

    /// A fetch changed `rid` at `now`.
    pub(crate) fn touch(&mut self, rid: RepoId, now: Instant) {
        self.pending
            .entry(rid)
            .and_modify(|(_, last)| *last = now)
            .or_insert((now, now));
    }

    fn deadline(&self, first: Instant, last: Instant) -> Instant {
        (last + self.quiet).min(first + self.max_wait)
    }

    /// The repositories whose time has come at `now` (taken out).
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<RepoId> {
        let mut due: Vec<RepoId> = self
            .pending
            .iter()
            .filter(|(_, (first, last))| self.deadline(*first, *last) <= now)
            .map(|(rid, _)| *rid)
            .collect();
        due.sort();
        for rid in &due {
            self.pending.remove(rid);
        }
        due
    }

    /// When the next repository becomes due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending
            .values()
            .map(|(first, last)| self.deadline(*first, *last))
            .min()
    }

    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_period_restarts_with_each_fetch_up_to_a_bound() {
        let q = Duration::from_secs(10);
        let mut d = Debouncer::new(q);
        let a = RepoId::from_oid_bytes([1; 20]);
        let b = RepoId::from_oid_bytes([2; 20]);
        let t0 = Instant::now();
        d.touch(a, t0);
        assert_eq!(d.next_deadline(), Some(t0 + q));
        assert!(d.take_due(t0 + q - Duration::from_secs(1)).is_empty());
        // Another fetch moves the deadline.
        d.touch(a, t0 + Duration::from_secs(5));
        assert!(d.take_due(t0 + q).is_empty());
        d.touch(b, t0 + Duration::from_secs(6));
        assert_eq!(d.take_due(t0 + Duration::from_secs(15)), vec![a]);
        assert_eq!(d.len(), 1);
        assert_eq!(d.take_due(t0 + Duration::from_secs(16)), vec![b]);
        assert_eq!(d.next_deadline(), None);

        // Fetched every 5 s forever: still due 10 × quiet after the first.
        let t1 = t0 + Duration::from_secs(100);
        let mut t = t1;
        let mut taken_at = None;
        while t < t1 + Duration::from_secs(200) {
            d.touch(a, t);
            if !d.take_due(t).is_empty() {
                taken_at = Some(t);
                break;
            }
            t += Duration::from_secs(5);
        }
        assert_eq!(taken_at, Some(t1 + q * 10));
    }
}
