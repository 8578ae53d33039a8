//! The change graph of one COB, without git: history parents and children and the order in
//! which `radicle-cob` visits the changes (`ChangeGraph::evaluate` → `Dag::prune_by` with
//! `chronological`). Shared by the identity rules and the issue/patch evaluation.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The loaded history: each change's committer time and history parents, and their children.
#[derive(Default)]
pub(crate) struct Dag {
    nodes: BTreeMap<gix::ObjectId, (u64, Vec<gix::ObjectId>)>,
    dependents: BTreeMap<gix::ObjectId, BTreeSet<gix::ObjectId>>,
}

impl Dag {
    /// The graph of `(id, committer time, parents)` nodes.
    pub(crate) fn new(
        nodes: impl IntoIterator<Item = (gix::ObjectId, u64, Vec<gix::ObjectId>)>,
    ) -> Self {
        let mut dag = Dag::default();
        for (id, timestamp, parents) in nodes {
            for parent in &parents {
                dag.dependents.entry(*parent).or_default().insert(id);
            }
            dag.nodes.insert(id, (timestamp, parents));
        }
        dag
    }

    /// Children in id order.
    pub(crate) fn children(&self, id: &gix::ObjectId) -> impl Iterator<Item = gix::ObjectId> + '_ {
        self.dependents.get(id).into_iter().flatten().copied()
    }

    /// Children in radicle's visiting order: by (committer time, id), iterated in reverse.
    fn ordered_children(&self, id: &gix::ObjectId) -> Vec<gix::ObjectId> {
        let mut children: Vec<(u64, gix::ObjectId)> = self
            .children(id)
            .filter_map(|c| self.nodes.get(&c).map(|(ts, _)| (*ts, c)))
            .collect();
        children.sort();
        children.into_iter().rev().map(|(_, c)| c).collect()
    }

    /// The evaluation order after `root`: for each child of the root in id order, a
    /// depth-first visit whose post-order is prepended to the result. Iterative, to bound
    /// stack use. Only changes that were loaded are visited.
    pub(crate) fn order(&self, root: &gix::ObjectId) -> VecDeque<gix::ObjectId> {
        let mut visited = BTreeSet::new();
        let mut order = VecDeque::new();
        for start in self.children(root) {
            if !self.nodes.contains_key(&start) || !visited.insert(start) {
                continue;
            }
            let mut stack = vec![(start, self.ordered_children(&start), 0usize)];
            while let Some((key, children, next)) = stack.last_mut() {
                if let Some(child) = children.get(*next).copied() {
                    *next += 1;
                    if visited.insert(child) {
                        let grandchildren = self.ordered_children(&child);
                        stack.push((child, grandchildren, 0));
                    }
                } else {
                    order.push_front(*key);
                    stack.pop();
                }
            }
        }
        order
    }

    /// `id` and every change that depends on it, transitively (what radicle removes when it
    /// prunes `id`).
    pub(crate) fn descendants(&self, id: &gix::ObjectId) -> BTreeSet<gix::ObjectId> {
        let mut out = BTreeSet::from([*id]);
        let mut stack: Vec<gix::ObjectId> = self.children(id).collect();
        while let Some(next) = stack.pop() {
            if out.insert(next) {
                stack.extend(self.children(&next));
            }
        }
        out
    }

    /// Whether some change is neither an ancestor nor a descendant of `id` (radicle's
    /// "concurrent" entries).
    pub(crate) fn has_concurrent(&self, id: &gix::ObjectId) -> bool {
        let mut related = self.descendants(id);
        let mut stack: Vec<gix::ObjectId> = self
            .nodes
            .get(id)
            .map(|(_, parents)| parents.clone())
            .unwrap_or_default();
        while let Some(next) = stack.pop() {
            if related.insert(next) {
                if let Some((_, parents)) = self.nodes.get(&next) {
                    stack.extend(parents.iter().copied());
                }
            }
        }
        related.len() < self.nodes.len()
    }
}
