//! Which repositories an identity announces when it holds more than its inventory cap (one
//! inventory message names at most 2,973 repositories, and `inventory_cap` may be lower).
//!
//! "Announce the most wanted": candidates are ranked by
//!
//! 1. demand class — `ceil(log2(1 + demand))` (0 below a quarter request), where demand is the decayed count of pack
//!    requests over HTTP and git streams over Radicle (`metrics::demand`): powers of two, so
//!    two repositories asked for about as often are in one class;
//! 2. recency class — updated (re-indexed after a change) within a day, a week, 30 days, a
//!    year, or longer ago;
//! 3. announced by the previous selection before not (hysteresis: within equal classes the
//!    announced ones stay, so a newcomer displaces one only by reaching a higher class);
//! 4. most recently updated, then RID (a total order: the same inputs always give the same
//!    answer).
//!
//! Classes change only when demand doubles (or halves, after a half-life without requests) or
//! an update crosses a day/week/month/year boundary, so between two refreshes with the same
//! inputs the selection is the same, and a change swaps only the repositories it concerns.

use std::cmp::Reverse;
use std::collections::HashSet;

use seedd_proto::crypto::RepoId;

/// One repository an identity could announce.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    pub rid: RepoId,
    /// Decayed request count.
    pub demand: f64,
    /// Unix seconds of its last update (0: unknown).
    pub updated: u64,
}

const DAY: u64 = 24 * 3600;

/// Newer is higher: 4 within a day, 3 a week, 2 30 days, 1 a year, 0 older or unknown.
fn recency_class(updated: u64, now: u64) -> u8 {
    if updated == 0 {
        return 0;
    }
    match now.saturating_sub(updated) {
        a if a < DAY => 4,
        a if a < 7 * DAY => 3,
        a if a < 30 * DAY => 2,
        a if a < 365 * DAY => 1,
        _ => 0,
    }
}

/// `ceil(log2(1 + demand))`: one request is class 1 until it has decayed below a quarter
/// (two half-lives), two are class 2 for a half-life, and so on.
fn demand_class(demand: f64) -> u32 {
    if !demand.is_finite() || demand < 0.25 {
        return 0;
    }
    (1.0 + demand).log2().ceil() as u32
}

/// The `cap` repositories to announce out of `candidates`, in RID order, given the previous
/// selection `previous` and the time `now` (Unix seconds). All of them when they fit.
pub(crate) fn select(
    candidates: Vec<Candidate>,
    cap: usize,
    previous: &HashSet<RepoId>,
    now: u64,
) -> Vec<RepoId> {
    let mut ranked: Vec<_> = candidates
        .into_iter()
        .map(|c| {
            let incumbent = previous.contains(&c.rid);
            (
                (
                    Reverse(demand_class(c.demand)),
                    Reverse(recency_class(c.updated, now)),
                    Reverse(incumbent),
                    Reverse(c.updated),
                    c.rid,
                ),
                c.rid,
            )
        })
        .collect();
    if ranked.len() > cap {
        ranked.select_nth_unstable_by(cap, |a, b| a.0.cmp(&b.0));
        ranked.truncate(cap);
    }
    let mut out: Vec<RepoId> = ranked.into_iter().map(|(_, rid)| rid).collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    fn rid(n: u16) -> RepoId {
        let mut b = [0u8; 20];
        b[..2].copy_from_slice(&n.to_be_bytes());
        RepoId::from_oid_bytes(b)
    }

    fn cand(n: u16, demand: f64, age: u64) -> Candidate {
        Candidate {
            rid: rid(n),
            demand,
            updated: NOW - age,
        }
    }

    fn set(v: &[RepoId]) -> HashSet<RepoId> {
        v.iter().copied().collect()
    }

    #[test]
    fn everything_fits_under_the_cap() {
        let c = vec![cand(2, 0.0, 10), cand(1, 5.0, 10)];
        assert_eq!(select(c, 5, &HashSet::new(), NOW), vec![rid(1), rid(2)]);
    }

    #[test]
    fn most_wanted_first_then_most_recently_updated() {
        let c = vec![
            cand(1, 0.0, 400 * DAY),  // old, never asked for
            cand(2, 0.0, 3600),       // pushed an hour ago
            cand(3, 20.0, 400 * DAY), // old but popular
            cand(4, 1.0, 400 * DAY),
            cand(5, 0.0, 10 * DAY),
        ];
        assert_eq!(select(c.clone(), 1, &HashSet::new(), NOW), vec![rid(3)]);
        assert_eq!(
            select(c.clone(), 2, &HashSet::new(), NOW),
            vec![rid(3), rid(4)]
        );
        assert_eq!(
            select(c.clone(), 3, &HashSet::new(), NOW),
            vec![rid(2), rid(3), rid(4)]
        );
        assert_eq!(
            select(c, 4, &HashSet::new(), NOW),
            vec![rid(2), rid(3), rid(4), rid(5)]
        );
    }

    #[test]
    fn same_inputs_same_selection_whatever_the_order() {
        let mut c: Vec<_> = (0..500u16)
            .map(|i| cand(i, f64::from(i % 7), u64::from(i % 13) * DAY))
            .collect();
        let first = select(c.clone(), 100, &HashSet::new(), NOW);
        assert_eq!(first.len(), 100);
        c.reverse();
        assert_eq!(select(c.clone(), 100, &HashSet::new(), NOW), first);
        // Refreshing with the previous answer keeps it (no flapping).
        let again = select(c.clone(), 100, &set(&first), NOW);
        assert_eq!(again, first);
        assert_eq!(select(c, 100, &set(&again), NOW), first);
    }

    #[test]
    fn an_announced_repository_is_displaced_only_from_a_higher_class() {
        let previous = set(&[rid(1)]);
        // Same recency; the incumbent has 4 requests (class 3: over 3 up to 7).
        for (challenger, displaced) in [(4.0, false), (6.0, false), (7.0, false), (7.5, true)] {
            let c = vec![cand(1, 4.0, 100 * DAY), cand(2, challenger, 100 * DAY)];
            let want = if displaced { rid(2) } else { rid(1) };
            assert_eq!(
                select(c, 1, &previous, NOW),
                vec![want],
                "challenger with {challenger}"
            );
        }
        // Once displaced, it comes back only from a higher class than the newcomer's.
        let now_in = set(&[rid(2)]);
        for (old, back) in [(4.0, false), (7.0, false), (8.0, true)] {
            let c = vec![cand(1, old, 100 * DAY), cand(2, 7.0, 100 * DAY)];
            let want = if back { rid(1) } else { rid(2) };
            assert_eq!(select(c, 1, &now_in, NOW), vec![want], "back with {old}");
        }
        // Equal classes: the incumbent stays even if the other was updated a bit later.
        let c = vec![cand(1, 0.0, 5 * DAY), cand(2, 0.0, 2 * DAY)];
        assert_eq!(select(c, 1, &previous, NOW), vec![rid(1)]);
        // A push (a newer recency class) does displace an idle incumbent.
        let c = vec![cand(1, 0.0, 5 * DAY), cand(2, 0.0, 60)];
        assert_eq!(select(c, 1, &previous, NOW), vec![rid(2)]);
    }

    #[test]
    fn classes() {
        assert_eq!(recency_class(0, NOW), 0);
        assert_eq!(recency_class(NOW, NOW), 4);
        assert_eq!(recency_class(NOW - 2 * DAY, NOW), 3);
        assert_eq!(recency_class(NOW - 20 * DAY, NOW), 2);
        assert_eq!(recency_class(NOW - 200 * DAY, NOW), 1);
        assert_eq!(recency_class(NOW - 2000 * DAY, NOW), 0);
        // A clock behind an update counts it as new.
        assert_eq!(recency_class(NOW + 50, NOW), 4);
        assert_eq!(demand_class(0.0), 0);
        assert_eq!(demand_class(0.2), 0);
        // One request, decayed a little, is still one request's class.
        assert_eq!(demand_class(0.9999), 1);
        assert_eq!(demand_class(1.0), 1);
        assert_eq!(demand_class(3.0), 2);
        assert_eq!(demand_class(3.5), 3);
        assert_eq!(demand_class(7.0), 3);
        assert_eq!(demand_class(7.5), 4);
        assert_eq!(demand_class(f64::NAN), 0);
        assert_eq!(demand_class(-3.0), 0);
    }
}
