//! The total work one COB evaluation (an issue, patch or job for the web API) or one fetch's
//! identity verification may do, and the flag that stops it when nobody waits any longer.
//!
//! A change's signature covers only its tree, so one signed tree of 256 action blobs of 1 MiB
//! can be named by any number of commits: per-blob bounds alone let a repository of a few
//! megabytes cost terabytes of parsing. A [`Budget`] counts, over the whole evaluation, the
//! changes loaded, the actions decoded and the bytes of action and document blobs handed to
//! the parser (a blob reused by many changes counts for each of them, although it is read from
//! git once: `read.rs` memoises trees and blobs by id), and the commits visited by ancestry
//! checks. Past any limit the evaluation stops with [`CobError::OverBudget`]; between changes
//! it checks its [`Cancel`] flag and stops with [`CobError::Cancelled`].

use std::cell::Cell;

use super::CobError;
use crate::blocking::Cancel;

/// What a budget counts (the `kind` label of `seedd_cob_budget_exceeded_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    /// Bytes of action, manifest, tree and document objects parsed.
    Bytes,
    /// Actions decoded.
    Actions,
    /// Changes (commits) loaded.
    Changes,
    /// Commits visited by ancestry checks (patch merges).
    Walk,
}

/// Every [`BudgetKind`]'s label, for the metric's known series.
pub(crate) const BUDGET_KINDS: &[&str] = &["bytes", "actions", "changes", "walk"];

impl BudgetKind {
    pub fn label(self) -> &'static str {
        match self {
            BudgetKind::Bytes => "bytes",
            BudgetKind::Actions => "actions",
            BudgetKind::Changes => "changes",
            BudgetKind::Walk => "walk",
        }
    }
}

/// Limits of one budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub(crate) bytes: u64,
    pub(crate) actions: u64,
    pub(crate) changes: u64,
    pub(crate) walk: u64,
}

/// One issue, patch or job evaluation: 16 MiB of actions (the largest real issues hold well
/// under 1 MiB), 50,000 actions, 10,000 changes, 1,000,000 commits walked by merge checks.
pub const EVALUATION: Limits = Limits {
    bytes: 16 * 1024 * 1024,
    actions: 50_000,
    changes: 10_000,
    walk: 1_000_000,
};

/// All identity verification of one fetch (real identity histories have a handful of changes
/// of well under 1 KiB, and documents under 64 KiB): 8 MiB, 10,000 actions, 10,000 changes.
pub const IDENTITY: Limits = Limits {
    bytes: 8 * 1024 * 1024,
    actions: 10_000,
    changes: 10_000,
    walk: 0,
};

/// What an evaluation may still do, and whether anybody still waits for it. Counters are
/// cells: the budget is shared by reference within the one thread doing the work.
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    bytes: Cell<u64>,
    actions: Cell<u64>,
    changes: Cell<u64>,
    walk: Cell<u64>,
    cancel: Cancel,
}

impl Budget {
    pub fn new(limits: Limits, cancel: Cancel) -> Self {
        Budget {
            limits,
            bytes: Cell::new(0),
            actions: Cell::new(0),
            changes: Cell::new(0),
            walk: Cell::new(0),
            cancel,
        }
    }

    /// A budget of `limits` nobody cancels.
    #[cfg(any(test, feature = "testing"))]
    pub fn with(limits: Limits) -> Self {
        Self::new(limits, Cancel::new())
    }

    /// Take `n` of `kind`: [`CobError::OverBudget`] once the total passes its limit, and
    /// [`CobError::Cancelled`] once the work was cancelled.
    pub(crate) fn charge(&self, kind: BudgetKind, n: u64) -> Result<(), CobError> {
        self.check()?;
        let (cell, limit) = match kind {
            BudgetKind::Bytes => (&self.bytes, self.limits.bytes),
            BudgetKind::Actions => (&self.actions, self.limits.actions),
            BudgetKind::Changes => (&self.changes, self.limits.changes),
            BudgetKind::Walk => (&self.walk, self.limits.walk),
        };
        let used = cell.get().saturating_add(n);
        cell.set(used);
        if used > limit {
            return Err(CobError::OverBudget { kind, limit });
        }
        Ok(())
    }

    /// [`CobError::Cancelled`] once nobody waits for the work any longer.
    pub fn check(&self) -> Result<(), CobError> {
        self.cancel.check().map_err(|_| CobError::Cancelled)
    }

    /// How much of `kind` was taken so far.
    #[cfg(test)]
    pub(crate) fn used(&self, kind: BudgetKind) -> u64 {
        match kind {
            BudgetKind::Bytes => self.bytes.get(),
            BudgetKind::Actions => self.actions.get(),
            BudgetKind::Changes => self.changes.get(),
            BudgetKind::Walk => self.walk.get(),
        }
    }
}
