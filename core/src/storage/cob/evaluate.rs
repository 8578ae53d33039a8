//! Materialising a COB (issue, patch) from its change graph the way `radicle-cob` does
//! (`change_graph.rs` `evaluate`): the root change (the COB id) initialises the object, then
//! every other change is applied in the graph's visiting order ([`Dag::order`]); a change that
//! does not load or verify is absent, and a change whose op cannot be decoded, is not authorised
//! or does not apply is pruned together with everything that depends on it. An invalid root
//! makes the whole COB invalid.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::budget::{Budget, BudgetKind};
use super::graph::Dag;
use super::read::{load_entry, Entry, Memo};
use super::{CobError, MAX_CHANGES};
use crate::storage::identity::Doc;
use seedd_proto::crypto::NodeId;

/// Commits an ancestry check may visit before it gives up (the change is then pruned).
const MAX_ANCESTRY_WALK: usize = 1_000_000;

/// Why an op did not apply (its change is pruned) or a root did not initialise.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("action {index} does not decode: {cause}")]
    Decode { index: i8, cause: serde_json::Error },
    #[error("the change commits to no identity (no Rad-Resource)")]
    MissingIdentity,
    #[error("identity document at {commit}: {reason}")]
    Doc {
        commit: gix::ObjectId,
        reason: String,
    },
    #[error("{0} is not known (missing causal dependency)")]
    Missing(gix::ObjectId),
    #[error("change {0}: empty body")]
    EmptyBody(gix::ObjectId),
    #[error("{author} is not authorised to {action}")]
    NotAuthorized {
        author: NodeId,
        action: &'static str,
    },
    #[error("change {0}: action not allowed")]
    NotAllowed(gix::ObjectId),
    #[error("invalid title {0:?}")]
    InvalidTitle(String),
    #[error("review edit with neither summary nor verdict")]
    EmptyReview,
    #[error("initialisation: {0}")]
    Init(&'static str),
    #[error("git: {0}")]
    Git(String),
    /// The evaluation as a whole must stop (budget spent, cancelled): not a pruned change.
    #[error(transparent)]
    Stop(CobError),
}

/// Why a COB could not be materialised at all.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("root change {0} is missing or does not verify")]
    NoRoot(gix::ObjectId),
    #[error("root change {id}: {cause}")]
    Root { id: gix::ObjectId, cause: OpError },
    #[error(transparent)]
    Load(#[from] CobError),
}

impl EvalError {
    /// Whether the same tips would fail the same way again (see [`CobError::is_permanent`]).
    pub fn is_permanent(&self) -> bool {
        match self {
            EvalError::Load(e) => e.is_permanent(),
            EvalError::NoRoot(_) | EvalError::Root { .. } => true,
        }
    }

    /// Which budget was exceeded, if that is why the evaluation stopped.
    pub fn over_budget(&self) -> Option<super::budget::BudgetKind> {
        match self {
            EvalError::Load(e) => e.over_budget(),
            _ => None,
        }
    }
}

/// One change's operation: its actions decoded as the COB type's actions.
pub struct Op<A> {
    pub(crate) id: gix::ObjectId,
    pub(crate) author: NodeId,
    /// Committer time, seconds.
    pub(crate) timestamp: u64,
    /// The identity head the change commits to.
    pub(crate) resource: Option<gix::ObjectId>,
    pub(crate) actions: Vec<A>,
}

impl<A: DeserializeOwned> Op<A> {
    fn decode(entry: &Entry) -> Result<Self, OpError> {
        let actions = entry
            .actions
            .iter()
            .map(|(index, bytes)| {
                serde_json::from_slice(bytes).map_err(|source| OpError::Decode {
                    index: *index,
                    cause: source,
                })
            })
            .collect::<Result<Vec<A>, _>>()?;
        Ok(Op {
            id: entry.id,
            author: entry.author,
            timestamp: entry.timestamp,
            resource: entry.resource,
            actions,
        })
    }
}

impl<A> Op<A> {
    /// The identity document the op commits to (authorisation is by its delegates).
    pub(crate) fn doc(&self, repo: &dyn Repo) -> Result<Arc<Doc>, OpError> {
        repo.doc_at(self.resource.ok_or(OpError::MissingIdentity)?)
    }
}

/// What evaluation reads from the repository besides the changes.
pub trait Repo {
    /// Load a change.
    fn entry(&self, id: gix::ObjectId) -> Result<Entry, CobError>;
    /// The identity document in identity change `commit` (`Doc::load_at`).
    fn doc_at(&self, commit: gix::ObjectId) -> Result<Arc<Doc>, OpError>;
    /// `refs/namespaces/<nid>/refs/heads/<branch>`, if it exists.
    fn branch_tip(&self, nid: &NodeId, branch: &str) -> Option<gix::ObjectId>;
    /// Whether `ancestor` is reachable from `head`.
    fn is_ancestor(&self, ancestor: gix::ObjectId, head: gix::ObjectId) -> Result<bool, OpError>;
}

/// A COB type that evaluates from ops (`store::Cob`).
pub trait Cob: Sized {
    type Action: DeserializeOwned;
    /// The object from its root op (`from_root`).
    fn from_root(op: Op<Self::Action>, repo: &dyn Repo) -> Result<Self, OpError>;
    /// Apply a later op (`op`); on error the change is pruned (what was already applied stays,
    /// as in radicle).
    fn apply(&mut self, op: Op<Self::Action>, repo: &dyn Repo) -> Result<(), OpError>;
}

/// Materialise COB `id` from the change graph reachable from `tips`. `budget` (the one the
/// repository charges its reads to) is checked for cancellation between changes; a spent budget
/// or cancellation stops the evaluation as a whole.
pub fn evaluate<T: Cob>(
    repo: &dyn Repo,
    id: gix::ObjectId,
    tips: &[gix::ObjectId],
    budget: &Budget,
) -> Result<T, EvalError> {
    let entries = load(repo, tips, budget)?;
    let dag = Dag::new(
        entries
            .values()
            .map(|e| (e.id, e.timestamp, e.parents.clone())),
    );
    let root = entries.get(&id).ok_or(EvalError::NoRoot(id))?;
    let mut object = match Op::decode(root).and_then(|op| T::from_root(op, repo)) {
        Ok(o) => o,
        Err(OpError::Stop(e)) => return Err(EvalError::Load(e)),
        Err(source) => return Err(EvalError::Root { id, cause: source }),
    };
    let mut pruned: BTreeSet<gix::ObjectId> = BTreeSet::new();
    for next in dag.order(&id) {
        budget.check()?;
        if pruned.contains(&next) {
            continue;
        }
        let Some(entry) = entries.get(&next) else {
            continue;
        };
        match Op::decode(entry).and_then(|op| object.apply(op, repo)) {
            Ok(()) => {}
            Err(OpError::Stop(e)) => return Err(EvalError::Load(e)),
            Err(e) => {
                tracing::debug!(cob = %id, change = %next, error = %crate::logging::chain(&e), "COB change pruned");
                pruned.extend(dag.descendants(&next));
            }
        }
    }
    Ok(object)
}

/// Every change reachable from `tips` through history parents that loads and verifies (at most
/// `MAX_CHANGES` are read). A spent budget or cancellation stops the load as a whole.
fn load(
    repo: &dyn Repo,
    tips: &[gix::ObjectId],
    budget: &Budget,
) -> Result<BTreeMap<gix::ObjectId, Entry>, CobError> {
    let mut entries = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut stack = tips.to_vec();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > MAX_CHANGES {
            return Err(CobError::TooLong);
        }
        budget.check()?;
        match repo.entry(id) {
            Ok(entry) => {
                stack.extend(entry.parents.iter().copied());
                entries.insert(id, entry);
            }
            Err(e @ (CobError::OverBudget { .. } | CobError::Cancelled)) => return Err(e),
            // radicle leaves a change it cannot load out of the graph.
            Err(e) => {
                tracing::debug!(change = %id, error = %crate::logging::chain(&e), "COB change does not load")
            }
        }
    }
    Ok(entries)
}

/// [`Repo`] over a git repository in storage for one evaluation: reads are charged to its
/// [`Budget`], trees and blobs read once ([`Memo`]), identity documents cached.
pub struct GitRepo<'a> {
    git: &'a gix::Repository,
    budget: &'a Budget,
    memo: Memo,
    docs: RefCell<HashMap<gix::ObjectId, Arc<Doc>>>,
}

impl<'a> GitRepo<'a> {
    pub fn new(git: &'a gix::Repository, budget: &'a Budget) -> Self {
        GitRepo {
            git,
            budget,
            memo: Memo::default(),
            docs: RefCell::new(HashMap::new()),
        }
    }

    /// Trees read from git so far.
    #[cfg(test)]
    pub(crate) fn tree_reads(&self) -> usize {
        self.memo.tree_reads()
    }
}

fn git_error(e: impl std::error::Error) -> OpError {
    OpError::Git(crate::logging::chain(&e).to_string())
}

impl Repo for GitRepo<'_> {
    fn entry(&self, id: gix::ObjectId) -> Result<Entry, CobError> {
        load_entry(self.git, id, None, self.budget, &self.memo)
    }

    fn doc_at(&self, commit: gix::ObjectId) -> Result<Arc<Doc>, OpError> {
        if let Some(doc) = self.docs.borrow().get(&commit) {
            return Ok(doc.clone());
        }
        let doc = crate::storage::identity::read(self.git, commit)
            .map(|identity| Arc::new(identity.doc))
            .map_err(|e| OpError::Doc {
                commit,
                reason: crate::logging::chain(&e).to_string(),
            })?;
        self.docs.borrow_mut().insert(commit, doc.clone());
        Ok(doc)
    }

    fn branch_tip(&self, nid: &NodeId, branch: &str) -> Option<gix::ObjectId> {
        let name = format!("refs/namespaces/{nid}/refs/heads/{branch}");
        let r = self.git.find_reference(name.as_str()).ok()?;
        r.target().try_id().map(ToOwned::to_owned)
    }

    fn is_ancestor(&self, ancestor: gix::ObjectId, head: gix::ObjectId) -> Result<bool, OpError> {
        let mut seen = BTreeSet::from([head]);
        let mut queue = VecDeque::from([head]);
        while let Some(id) = queue.pop_front() {
            if id == ancestor {
                return Ok(true);
            }
            if seen.len() > MAX_ANCESTRY_WALK {
                return Err(OpError::Git(format!(
                    "ancestry walk over {MAX_ANCESTRY_WALK} commits"
                )));
            }
            self.budget
                .charge(BudgetKind::Walk, 1)
                .map_err(OpError::Stop)?;
            let commit = self.git.find_commit(id).map_err(git_error)?;
            for parent in commit.parent_ids() {
                if seen.insert(parent.detach()) {
                    queue.push_back(parent.detach());
                }
            }
        }
        Ok(false)
    }
}

/// What a COB type's authorisation rules say about an action (issues, patches).
pub(crate) enum Authorization {
    Allow,
    Deny,
    /// The target was redacted: the action is skipped.
    Unknown,
}

impl From<bool> for Authorization {
    fn from(allowed: bool) -> Self {
        if allowed {
            Authorization::Allow
        } else {
            Authorization::Deny
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
