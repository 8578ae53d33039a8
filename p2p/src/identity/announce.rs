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

/// A candidate's rank: smaller is better; a total order (the RID last).
type Key = (
    Reverse<u32>,
    Reverse<u8>,
    Reverse<bool>,
    Reverse<u64>,
    RepoId,
);

fn key(c: &Candidate, incumbent: bool, now: u64) -> Key {
    (
        Reverse(demand_class(c.demand)),
        Reverse(recency_class(c.updated, now)),
        Reverse(incumbent),
        Reverse(c.updated),
        c.rid,
    )
}

/// How many runners-up a [`Selection`] keeps to fill the places of removed repositories.
pub(crate) const SPARES: usize = 256;

/// An over-cap identity's selection, kept so that a change of membership costs the selection
/// and its runners-up, not every held repository ([`Selection::update`]).
///
/// The invariant that makes an update exact: every held repository that is neither chosen
/// nor a spare (an *outsider*) ranks at or below `bar`, and every spare above it. Over time
/// an outsider's rank only falls (demand decays, updates age), so the invariant holds until
/// an outsider is asked for again; a full selection every few minutes catches that.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    /// What is announced, in RID order.
    pub chosen: Vec<RepoId>,
    /// The best of the others, best first (at most [`SPARES`]).
    spares: Vec<RepoId>,
    /// The rank of the best outsider when there is one (`None`: there is none).
    bar: Option<Key>,
    /// How many spares are kept ([`SPARES`]).
    keep: usize,
}

impl Selection {
    /// The `cap` most wanted of `candidates` (every held repository), given the previous
    /// selection `previous` and the time `now` (Unix seconds); all of them when they fit.
    pub(crate) fn full(
        candidates: Vec<Candidate>,
        cap: usize,
        previous: &HashSet<RepoId>,
        now: u64,
    ) -> Self {
        Self::full_keeping(candidates, cap, previous, now, SPARES)
    }

    fn full_keeping(
        candidates: Vec<Candidate>,
        cap: usize,
        previous: &HashSet<RepoId>,
        now: u64,
        keep: usize,
    ) -> Self {
        let mut ranked: Vec<(Key, Candidate)> = candidates
            .into_iter()
            .map(|c| (key(&c, previous.contains(&c.rid), now), c))
            .collect();
        let rest = if ranked.len() > cap {
            ranked.select_nth_unstable_by(cap, |a, b| a.0.cmp(&b.0));
            ranked.split_off(cap)
        } else {
            Vec::new()
        };
        let chosen = ranked.into_iter().map(|(_, c)| c.rid).collect();
        // The others, ranked as the next update sees them: none is an incumbent.
        let mut rest: Vec<(Key, RepoId)> = rest
            .into_iter()
            .map(|(_, c)| (key(&c, false, now), c.rid))
            .collect();
        let bar = Self::keep_best(&mut rest, keep);
        rest.sort_unstable();
        Self::new(
            chosen,
            rest.into_iter().map(|(_, r)| r).collect(),
            bar,
            keep,
        )
    }

    /// Cuts `ranked` to its `keep` best; the best rank cut (`None` when none is).
    fn keep_best(ranked: &mut Vec<(Key, RepoId)>, keep: usize) -> Option<Key> {
        if ranked.len() <= keep {
            return None;
        }
        ranked.select_nth_unstable_by(keep, |a, b| a.0.cmp(&b.0));
        let bar = ranked.get(keep).map(|(k, _)| *k);
        ranked.truncate(keep);
        bar
    }

    fn new(mut chosen: Vec<RepoId>, spares: Vec<RepoId>, bar: Option<Key>, keep: usize) -> Self {
        chosen.sort_unstable();
        chosen.dedup();
        Self {
            chosen,
            spares,
            bar,
            keep,
        }
    }

    /// The chosen and the spares: what an update ranks again, with what was added.
    pub(crate) fn pool(&self) -> impl Iterator<Item = RepoId> + '_ {
        self.chosen.iter().chain(self.spares.iter()).copied()
    }

    /// The selection after a change: `pool` is [`Selection::pool`] with the removed
    /// repositories left out and the added ones in (each once). The same answer a full
    /// selection over every held repository would give with this selection as the previous
    /// one, at the cost of the pool; `None` when the pool cannot give it (too many of the
    /// chosen and spares removed): select in full.
    pub(crate) fn update(&self, pool: Vec<Candidate>, cap: usize, now: u64) -> Option<Self> {
        let incumbent: HashSet<RepoId> = self.chosen.iter().copied().collect();
        // Only what ranks above the bar is sure to beat every outsider.
        let above = |k: &Key| self.bar.is_none_or(|b| *k < b);
        let mut safe: Vec<(Key, Candidate)> = pool
            .into_iter()
            .map(|c| (key(&c, incumbent.contains(&c.rid), now), c))
            .filter(|(k, _)| above(k))
            .collect();
        if safe.len() < cap && self.bar.is_some() {
            return None;
        }
        let rest = if safe.len() > cap {
            safe.select_nth_unstable_by(cap, |a, b| a.0.cmp(&b.0));
            safe.split_off(cap)
        } else {
            Vec::new()
        };
        let chosen: Vec<RepoId> = safe.into_iter().map(|(_, c)| c.rid).collect();
        // Those that fell to or below the bar (no longer incumbents) join the outsiders.
        let mut rest: Vec<(Key, RepoId)> = rest
            .into_iter()
            .map(|(_, c)| (key(&c, false, now), c.rid))
            .filter(|(k, _)| above(k))
            .collect();
        let bar = match (Self::keep_best(&mut rest, self.keep), self.bar) {
            (Some(cut), Some(bar)) => Some(cut.min(bar)),
            (cut, bar) => cut.or(bar),
        };
        rest.sort_unstable();
        Some(Self::new(
            chosen,
            rest.into_iter().map(|(_, r)| r).collect(),
            bar,
            self.keep,
        ))
    }
}

/// The `cap` repositories to announce out of `candidates`, in RID order, given the previous
/// selection `previous` and the time `now` (Unix seconds). All of them when they fit.
#[cfg(test)]
pub(crate) fn select(
    candidates: Vec<Candidate>,
    cap: usize,
    previous: &HashSet<RepoId>,
    now: u64,
) -> Vec<RepoId> {
    Selection::full(candidates, cap, previous, now).chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// A held set: demand and age drawn from a few classes so ties (and incumbency) matter.
    fn held_strategy(most: usize) -> impl Strategy<Value = Vec<Candidate>> {
        prop::collection::vec((0u8..6, 0u8..8, 0u16..400), 0..most).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (d, a, jitter))| {
                    let demand = [0.0, 0.5, 1.0, 3.0, 9.0, 40.0][usize::from(d)];
                    let age = [
                        60,
                        2 * DAY,
                        20 * DAY,
                        200 * DAY,
                        900 * DAY,
                        0,
                        3600,
                        5 * DAY,
                    ][usize::from(a)];
                    Candidate {
                        rid: rid(i as u16),
                        demand,
                        updated: if age == 0 {
                            0
                        } else {
                            NOW - age - u64::from(jitter)
                        },
                    }
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// Updates through adds and removes answer what a full selection over every held
        /// repository answers with the same previous selection, or decline (then the caller
        /// selects in full, as the test does).
        #[test]
        fn updates_agree_with_full_selections(
            held in prop_oneof![held_strategy(40), held_strategy(400)],
            cap in 1usize..30,
            keep in 0usize..6,
            steps in prop::collection::vec((any::<bool>(), 0usize..1000, 0u8..6, 0u8..5), 1..80),
        ) {
            let mut held: std::collections::BTreeMap<RepoId, Candidate> =
                held.into_iter().map(|c| (c.rid, c)).collect();
            let mut sel = Selection::full_keeping(
                held.values().cloned().collect(), cap, &HashSet::new(), NOW, keep,
            );
            let mut updated = 0;
            for (add, pick, d, a) in steps {
                let changed = if add {
                    let c = Candidate {
                        rid: rid(1000 + pick as u16),
                        demand: [0.0, 0.5, 1.0, 3.0, 9.0, 40.0][usize::from(d)],
                        updated: NOW - [60, 2 * DAY, 20 * DAY, 200 * DAY, 900 * DAY][usize::from(a)],
                    };
                    held.insert(c.rid, c.clone());
                    c.rid
                } else {
                    let Some(r) = held.keys().nth(pick % held.len().max(1)).copied() else {
                        continue;
                    };
                    // Removals pick among the chosen and spares half of the time (they matter).
                    let r = if pick % 2 == 0 {
                        sel.pool().nth(pick / 2 % (cap + keep)).unwrap_or(r)
                    } else {
                        r
                    };
                    held.remove(&r);
                    r
                };
                let previous: HashSet<RepoId> = sel.chosen.iter().copied().collect();
                let full = Selection::full_keeping(
                    held.values().cloned().collect(), cap, &previous, NOW, keep,
                );
                let mut pool: Vec<RepoId> = sel.pool().filter(|r| held.contains_key(r)).collect();
                if add && !pool.contains(&changed) {
                    pool.push(changed);
                }
                let pool = pool.into_iter().map(|r| held[&r].clone()).collect();
                match sel.update(pool, cap, NOW) {
                    Some(next) => {
                        prop_assert_eq!(&next.chosen, &full.chosen);
                        updated += 1;
                        sel = next;
                    }
                    None => sel = full,
                }
            }
            // How many steps updated rather than declined (kept for a failing case's report).
            let _ = updated;
        }
    }

    #[test]
    fn an_update_fills_a_removed_place_from_the_spares_and_declines_when_they_run_out() {
        // 600 held, cap 3: ranked by update time (one demand class), rid 599 best.
        let held: std::collections::HashMap<RepoId, Candidate> = (0..600u16)
            .map(|i| cand(i, 0.0, 400 * DAY + u64::from(600 - i)))
            .map(|c| (c.rid, c))
            .collect();
        let of = |rids: &mut dyn Iterator<Item = RepoId>| -> Vec<Candidate> {
            rids.map(|r| held[&r].clone()).collect()
        };
        let sel = Selection::full(held.values().cloned().collect(), 3, &HashSet::new(), NOW);
        assert_eq!(sel.chosen, vec![rid(597), rid(598), rid(599)]);
        assert_eq!(sel.spares.len(), SPARES);
        assert_eq!(sel.spares[0], rid(596), "best first");
        // rid 599 leaves: the best spare takes its place.
        let pool = of(&mut sel.pool().filter(|r| *r != rid(599)));
        let next = sel.update(pool, 3, NOW).unwrap();
        assert_eq!(next.chosen, vec![rid(596), rid(597), rid(598)]);
        // A newcomer better than all: in; the weakest chosen goes back to the spares.
        let mut pool = of(&mut next.pool());
        pool.push(cand(1000, 50.0, 60));
        let after = next.update(pool, 3, NOW).unwrap();
        assert_eq!(after.chosen, vec![rid(597), rid(598), rid(1000)]);
        assert!(after.spares.contains(&rid(596)));
        // Chosen and spares all gone but two: an outsider might be next, so it declines.
        let pool = of(&mut after.pool().take(2));
        assert_eq!(after.update(pool, 3, NOW), None);
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
