//! An ordered set with positional access: the web API's listings read page `k` in
//! O(page + n/B) instead of walking (or decoding) every repository before it. Sorted blocks
//! of at most `2·B` entries; insert and remove cost O(log(n/B) + B), `range(skip, take)` sums
//! block lengths up to `skip` and copies the page.

/// Entries per block after a split (blocks hold `1..=2·B`).
const B: usize = 512;

#[derive(Debug, Clone)]
pub(super) struct RankedSet<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for RankedSet<T> {
    fn default() -> Self {
        Self {
            blocks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Ord + Clone> RankedSet<T> {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The block that holds `x` or would: the first whose last entry is ≥ `x`, else the last.
    fn block_of(&self, x: &T) -> usize {
        let i = self
            .blocks
            .partition_point(|b| b.last().is_some_and(|last| last < x));
        i.min(self.blocks.len().saturating_sub(1))
    }

    /// Adds `x`; whether it was new.
    pub(super) fn insert(&mut self, x: T) -> bool {
        if self.blocks.is_empty() {
            self.blocks.push(vec![x]);
            self.len = 1;
            return true;
        }
        let i = self.block_of(&x);
        let Some(block) = self.blocks.get_mut(i) else {
            return false;
        };
        match block.binary_search(&x) {
            Ok(_) => false,
            Err(at) => {
                block.insert(at, x);
                self.len += 1;
                if block.len() > 2 * B {
                    let tail = block.split_off(B);
                    self.blocks.insert(i + 1, tail);
                }
                true
            }
        }
    }

    /// Removes `x`; whether it was there.
    pub(super) fn remove(&mut self, x: &T) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let i = self.block_of(x);
        let Some(block) = self.blocks.get_mut(i) else {
            return false;
        };
        let Ok(at) = block.binary_search(x) else {
            return false;
        };
        block.remove(at);
        self.len -= 1;
        if block.is_empty() {
            self.blocks.remove(i);
        }
        true
    }

    pub(super) fn contains(&self, x: &T) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        self.blocks
            .get(self.block_of(x))
            .is_some_and(|b| b.binary_search(x).is_ok())
    }

    /// How many entries sort before `x` (whether or not it is in the set).
    pub(super) fn rank(&self, x: &T) -> usize {
        if self.blocks.is_empty() {
            return 0;
        }
        let i = self.block_of(x);
        let before: usize = self.blocks.iter().take(i).map(Vec::len).sum();
        let within = self
            .blocks
            .get(i)
            .map(|b| b.partition_point(|y| y < x))
            .unwrap_or(0);
        before + within
    }

    /// The entries from position `skip` on, in order (lazily: take what the page needs).
    pub(super) fn iter_from(&self, skip: usize) -> impl Iterator<Item = &T> + '_ {
        let mut left = skip;
        let mut first = self.blocks.len();
        let mut offset = 0;
        for (i, b) in self.blocks.iter().enumerate() {
            if left < b.len() {
                first = i;
                offset = left;
                break;
            }
            left -= b.len();
        }
        self.blocks
            .iter()
            .skip(first)
            .enumerate()
            .flat_map(move |(n, b)| b.iter().skip(if n == 0 { offset } else { 0 }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u16>().prop_map(|x| Op::Insert(x % 4000)),
            1 => any::<u16>().prop_map(|x| Op::Remove(x % 4000)),
        ]
    }

    proptest! {
        /// Every operation and query agrees with a `BTreeSet` (enough entries to split blocks).
        #[test]
        fn behaves_as_an_ordered_set(ops in proptest::collection::vec(op(), 0..6000),
                                     skip in 0usize..5000, take in 0usize..300, probe in 0u16..4000) {
            let mut ours = RankedSet::default();
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(x) => prop_assert_eq!(ours.insert(x), model.insert(x)),
                    Op::Remove(x) => prop_assert_eq!(ours.remove(&x), model.remove(&x)),
                }
            }
            prop_assert_eq!(ours.len(), model.len());
            prop_assert_eq!(ours.contains(&probe), model.contains(&probe));
            prop_assert_eq!(ours.rank(&probe), model.range(..probe).count());
            let page: Vec<u16> = ours.iter_from(skip).take(take).copied().collect();
            let want: Vec<u16> = model.iter().skip(skip).take(take).copied().collect();
            prop_assert_eq!(page, want);
            prop_assert!(ours.blocks.iter().all(|b| !b.is_empty() && b.len() <= 2 * B));
        }
    }

    #[test]
    fn a_deep_page_does_not_walk_the_entries_before_it() {
        let mut s = RankedSet::default();
        for x in (0..100_000u32).rev() {
            s.insert(x);
        }
        assert_eq!(s.len(), 100_000);
        assert!(s.blocks.len() >= 100_000 / (2 * B));
        let page: Vec<u32> = s.iter_from(99_990).take(20).copied().collect();
        assert_eq!(page, (99_990..100_000).collect::<Vec<_>>());
        assert_eq!(s.iter_from(100_000).next(), None);
        assert_eq!(s.rank(&50_000), 50_000);
    }
}
