//! Validation of fetched refs and their atomic application (protocol.md §2.3, §6.5, §6.6).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use seedd_proto::crypto::{NodeId, RepoId};

use super::plumbing::{
    git, guarded, held_ref, is_ancestor, migrate, refs_under, snapshot, transaction,
};
use super::{FetchConfig, FetchError, QUARANTINE};
use seedd_core::blocking::Cancel;
use seedd_core::storage::cob::budget::Budget;
use seedd_core::storage::identity::{self, Identity};
use seedd_core::storage::{cob, sigrefs};

/// Why a fetch as a whole was rejected (nothing written).
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    #[error("the peer has no canonical refs/rad/id")]
    MissingIdentity,
    /// The offered identity history breaks the identity rules.
    #[error("identity document: {0}")]
    IdentityHistory(cob::CobError),
    /// The identity document cannot be read.
    #[error("identity document: {0}")]
    IdentityDocument(identity::IdentityError),
    /// The same identity history was refused before (remembered by tips).
    #[error("identity document: refused before: {0}")]
    Refused(String),
    #[error("delegate {0} has diverged rad/sigrefs")]
    DelegateDiverged(NodeId),
    #[error("only {valid} valid delegate(s), threshold is {threshold}")]
    Threshold { valid: usize, threshold: usize },
}

impl ValidationError {
    /// The metric label: one of [`seedd_core::metrics::labels::VALIDATION_FAILURES`] (a test in `metrics`
    /// checks that every variant's is listed there).
    pub(crate) fn label(&self) -> &'static str {
        match self {
            ValidationError::MissingIdentity => "missing_identity",
            ValidationError::IdentityHistory(_)
            | ValidationError::IdentityDocument(_)
            | ValidationError::Refused(_) => "identity",
            ValidationError::DelegateDiverged(_) => "delegate_diverged",
            ValidationError::Threshold { .. } => "threshold",
        }
    }
}

impl ValidationError {
    /// Which identity budget was exceeded, if that is why the fetch was refused.
    pub(crate) fn over_budget(&self) -> Option<cob::budget::BudgetKind> {
        match self {
            ValidationError::IdentityHistory(e) => e.over_budget(),
            _ => None,
        }
    }
}

/// What a fetch changed.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub cloned: bool,
    /// Namespaces updated, with their new `rad/sigrefs` commit.
    pub updated: Vec<(NodeId, [u8; 20])>,
    /// Namespaces dropped: the namespace, a metric label and the reason.
    pub pruned: Vec<(NodeId, &'static str, String)>,
    pub refs_written: usize,
}

/// The canonical tip: the newest commit that at least `threshold` delegates' tips contain
/// (each tip votes for itself and its ancestors among the candidates), or `None`.
pub(super) fn quorum(
    tips: &[String],
    threshold: usize,
    is_ancestor: impl Fn(&str, &str) -> bool,
) -> Option<String> {
    let mut best: Option<&String> = None;
    for candidate in tips {
        let votes = tips
            .iter()
            .filter(|t| *t == candidate || is_ancestor(candidate, t))
            .count();
        if votes < threshold {
            continue;
        }
        best = match best {
            Some(b) if b == candidate || !is_ancestor(b, candidate) => Some(b),
            _ => Some(candidate),
        };
    }
    best.cloned()
}

/// After the special-refs stage: the objects to fetch — every oid named by the verified signed
/// refs of wanted namespaces that are ahead of what we hold, and that we lack. `q` is the
/// fetch's quarantine repository (its objects plus ours through the alternate link), `live`
/// the repository in storage.
#[allow(clippy::too_many_arguments)]
pub(super) fn data_wants(
    cfg: &FetchConfig,
    rid: RepoId,
    q: &Path,
    live: &Path,
    wants: &dyn Fn(&NodeId, bool) -> bool,
    memo: &IdentityMemo,
    cancel: &Cancel,
) -> Result<Vec<String>, FetchError> {
    let gix_repo = gix::open(q).map_err(FetchError::repository)?;
    let fetched: BTreeMap<String, String> = refs_under(q, QUARANTINE)?.into_iter().collect();
    // Delegates come from the identity the fetch will be validated against (ours unless the
    // peer's is a verified successor), never from an unverified document.
    let ident = resolve_identity(cfg, &gix_repo, rid, q, live, &fetched, memo, cancel)?.ident;
    let ns_prefix = format!("{QUARANTINE}/namespaces/");
    // One budget for every namespace of the fetch: a peer cannot multiply the work by
    // announcing many namespaces.
    let mut budget = sigrefs::Budget::default();
    let mut out = Vec::new();
    for (name, tip) in &fetched {
        let Some(nid) = name
            .strip_prefix(&ns_prefix)
            .and_then(|r| r.strip_suffix("/refs/rad/sigrefs"))
            .and_then(|n| n.parse::<NodeId>().ok())
        else {
            continue;
        };
        if !wants(&nid, ident.doc.delegates.contains(&nid)) {
            continue;
        }
        let current = held_ref(live, &format!("refs/namespaces/{nid}/refs/rad/sigrefs"))?;
        if current.as_deref() == Some(tip.as_str()) {
            continue;
        }
        let Ok(tip_id) = gix::ObjectId::from_hex(tip.as_bytes()) else {
            continue;
        };
        // Invalid ones are pruned (and counted) when applying.
        let Ok(signed) = sigrefs::verify_within(&gix_repo, rid, &nid, tip_id, &mut budget) else {
            continue;
        };
        for (name, oid) in &signed.refs {
            if name != "refs/rad/sigrefs-parent" && !gix_repo.has_object(oid) {
                out.push(oid.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The delegates of the identity a fetch will be validated against (after the special refs).
pub(super) fn identity_delegates(
    cfg: &FetchConfig,
    rid: RepoId,
    q: &Path,
    live: &Path,
    memo: &IdentityMemo,
    cancel: &Cancel,
) -> Result<Vec<NodeId>, FetchError> {
    let gix_repo = gix::open(q).map_err(FetchError::repository)?;
    let fetched: BTreeMap<String, String> = refs_under(q, QUARANTINE)?.into_iter().collect();
    Ok(
        resolve_identity(cfg, &gix_repo, rid, q, live, &fetched, memo, cancel)?
            .ident
            .doc
            .delegates,
    )
}

/// The identity a fetch is validated against.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    pub ident: Identity,
    /// `refs/rad/id` moves to `ident.head` (else ours stands).
    pub adopt: bool,
}

/// Identity refusals remembered across fetches, at most (then forgotten all at once).
const MAX_REFUSALS: usize = 4096;

/// What (offered, ours) identity tips resolve to: within one fetch every step asks for the same
/// tips, and the history is verified once (each verification within [`cob::budget::IDENTITY`]);
/// across fetches, a permanent refusal is remembered by tips so that a peer announcing the same
/// history again is refused at once.
#[derive(Default)]
pub(crate) struct IdentityMemo {
    resolved: Mutex<HashMap<(gix::ObjectId, Option<gix::ObjectId>), Resolved>>,
}

/// (repository, offered identity head, ours) → why it was refused.
type Refusals = HashMap<(RepoId, gix::ObjectId, Option<gix::ObjectId>), String>;

/// Permanent identity refusals by (repository, offered, ours), across fetches.
fn refusals() -> &'static Mutex<Refusals> {
    static REFUSED: OnceLock<Mutex<Refusals>> = OnceLock::new();
    REFUSED.get_or_init(Default::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Which identity revision wins: ours, unless the one the peer offers is a successor by the
/// identity rules (protocol.md §6.4 stage 1). An identity that is behind ours (a stale or
/// rewound peer) is ignored — an older revision is valid on its own, and adopting it would
/// bring back removed delegates, an old threshold or an old visibility and allow list. One
/// that diverges from ours is decided by replaying the merged history of both heads, so the
/// delegates' accepts decide, not the recency of a fetch; a result that is not ahead of ours
/// leaves ours in place, and so does one that diverges from ours without the accepts of a
/// majority of our current delegates (a back-dated fork signed by a retired delegate set).
/// Resolved once per fetch (`memo`); the verification stops when `cancel` is set.
#[allow(clippy::too_many_arguments)]
pub(super) fn resolve_identity(
    cfg: &FetchConfig,
    git: &gix::Repository,
    rid: RepoId,
    q: &Path,
    live: &Path,
    fetched: &BTreeMap<String, String>,
    memo: &IdentityMemo,
    cancel: &Cancel,
) -> Result<Resolved, FetchError> {
    let offered_hex = fetched
        .get(&format!("{QUARANTINE}/rad/id"))
        .ok_or(ValidationError::MissingIdentity)?;
    let offered =
        gix::ObjectId::from_hex(offered_hex.as_bytes()).map_err(FetchError::repository)?;
    let ours_hex = held_ref(live, "refs/rad/id")?;
    let ours = match &ours_hex {
        Some(h) => Some(gix::ObjectId::from_hex(h.as_bytes()).map_err(FetchError::repository)?),
        None => None,
    };
    if let Some(r) = lock(&memo.resolved).get(&(offered, ours)) {
        return Ok(r.clone());
    }
    if let Some(why) = lock(refusals()).get(&(rid, offered, ours)) {
        return Err(ValidationError::Refused(why.clone()).into());
    }
    let budget = Budget::new(cob::budget::IDENTITY, cancel.clone());
    let resolved = resolve_uncached(cfg, git, rid, q, offered, ours, &budget);
    match &resolved {
        Ok(r) => {
            lock(&memo.resolved).insert((offered, ours), r.clone());
        }
        Err(FetchError::Invalid(ValidationError::IdentityHistory(e))) if e.is_permanent() => {
            let mut refused = lock(refusals());
            if refused.len() >= MAX_REFUSALS {
                refused.clear();
            }
            refused.insert((rid, offered, ours), e.to_string());
        }
        Err(_) => {}
    }
    resolved
}

fn resolve_uncached(
    cfg: &FetchConfig,
    git: &gix::Repository,
    rid: RepoId,
    q: &Path,
    offered: gix::ObjectId,
    ours: Option<gix::ObjectId>,
    budget: &Budget,
) -> Result<Resolved, FetchError> {
    let offered_hex = offered.to_string();
    let Some(ours) = ours else {
        let ident =
            cob::verify_identity(git, rid, offered, budget).map_err(ValidationError::from)?;
        return Ok(Resolved { ident, adopt: true });
    };
    let ours_hex = ours.to_string();
    // Ours was verified when it was adopted; its document is read as stored.
    let ours_ident = identity::read(git, ours).map_err(ValidationError::from)?;
    let keep = |why: &'static str| -> Result<Resolved, FetchError> {
        if ours != offered {
            tracing::info!(%rid, ours = %ours, offered = %offered, why, "keeping our identity revision");
        }
        Ok(Resolved {
            ident: ours_ident.clone(),
            adopt: false,
        })
    };
    if offered == ours || is_ancestor(cfg, q, &offered_hex, &ours_hex)? {
        return keep("the offered identity is behind ours");
    }
    let Some(merged) = cob::verify_successor(git, rid, ours, &ours_ident.doc, offered, budget)
        .map_err(ValidationError::from)?
    else {
        return keep("the merged history adopts a revision that diverges from ours without the accepts of our current delegates");
    };
    let merged_hex = merged.head.to_string();
    if merged.head == ours || is_ancestor(cfg, q, &merged_hex, &ours_hex)? {
        return keep("the identity rules adopt no revision ahead of ours");
    }
    if !is_ancestor(cfg, q, &ours_hex, &merged_hex)? {
        tracing::info!(%rid, ours = %ours, adopted = %merged.head, "identity histories diverged; adopting the revision the merged history and our current delegates accept");
    }
    Ok(Resolved {
        ident: merged,
        adopt: true,
    })
}

/// What [`validate_and_apply`] asks of its caller.
pub(super) struct Hooks<'a> {
    /// A namespace was pruned, with the reason's label.
    pub on_prune: &'a dyn Fn(&'static str),
    /// Whether a namespace is in scope (node id, is a delegate).
    pub wants: &'a dyn Fn(&NodeId, bool) -> bool,
    /// The adopted document, before any object or ref reaches the live repository.
    pub before_write: &'a dyn Fn(&identity::Doc) -> Result<(), FetchError>,
}

/// Validates what the fetch put under the quarantine refs of `q` (the fetch's quarantine
/// repository) and applies it to `live`: the accepted objects are migrated, then every ref is
/// written in one transaction. On any error nothing reaches `live`.
#[allow(clippy::too_many_arguments)]
pub(super) fn validate_and_apply(
    cfg: &FetchConfig,
    rid: RepoId,
    q: &Path,
    live: &Path,
    local: &NodeId,
    hooks: &Hooks<'_>,
    memo: &IdentityMemo,
    cancel: &Cancel,
) -> Result<Outcome, FetchError> {
    let Hooks {
        on_prune,
        wants,
        before_write,
    } = hooks;
    let gix_repo = gix::open(q).map_err(FetchError::repository)?;
    let fetched = refs_under(q, QUARANTINE)?;
    let fetched: BTreeMap<String, String> = fetched.into_iter().collect();

    // 1. The identity document: ours, or the peer's when it is a verified successor.
    // Every ref of the repository as validation starts: the transaction only commits if none
    // of the refs it writes moved meanwhile (another writer, or this apply outliving its fetch's
    // deadline while a newer fetch ran) — never a step back.
    let before = snapshot(live)?;
    let resolved = resolve_identity(cfg, &gix_repo, rid, q, live, &fetched, memo, cancel)?;
    let ident = &resolved.ident;
    let doc = &ident.doc;
    let threshold = if doc.delegates.contains(local) {
        doc.threshold.saturating_sub(1)
    } else {
        doc.threshold
    };

    // 2. Each namespace's signed refs.
    let ns_prefix = format!("{QUARANTINE}/namespaces/");
    let mut namespaces: Vec<NodeId> = fetched
        .keys()
        .filter_map(|name| {
            let rest = name.strip_prefix(&ns_prefix)?;
            let (nid, tail) = rest.split_once('/')?;
            (tail == "refs/rad/sigrefs").then(|| nid.parse().ok())?
        })
        .collect();
    namespaces.sort();
    let mut outcome = Outcome::default();
    let mut budget = sigrefs::Budget::default();
    let mut valid_delegates = 0usize;
    let mut lines = Vec::new();
    // Signed refs of the namespaces being updated (the new state, not yet written).
    let mut applied: BTreeMap<NodeId, BTreeMap<String, gix::ObjectId>> = BTreeMap::new();
    for nid in namespaces {
        let is_delegate = doc.delegates.contains(&nid);
        if !wants(&nid, is_delegate) {
            tracing::debug!(%rid, namespace = %nid, "namespace not wanted (scope or blocked)");
            continue;
        }
        let fetched_ref = |name: &str| fetched.get(&format!("{ns_prefix}{nid}/{name}"));
        let Some(tip) = fetched_ref("refs/rad/sigrefs") else {
            continue;
        };
        let tip_id = gix::ObjectId::from_hex(tip.as_bytes()).map_err(FetchError::repository)?;
        let signed = match sigrefs::verify_within(&gix_repo, rid, &nid, tip_id, &mut budget) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%rid, namespace = %nid, error = %seedd_core::logging::chain(&e), "pruning namespace: invalid signed refs");
                on_prune("invalid_sigrefs");
                outcome.pruned.push((nid, "invalid_sigrefs", e.to_string()));
                continue;
            }
        };
        let current = held_ref(live, &format!("refs/namespaces/{nid}/refs/rad/sigrefs"))?;
        match &current {
            Some(cur) if cur == tip => {
                // Unchanged.
                if is_delegate {
                    valid_delegates += 1;
                }
                continue;
            }
            Some(cur) => {
                if is_ancestor(cfg, q, tip, cur)? {
                    // Behind what we hold: ignored.
                    if is_delegate {
                        valid_delegates += 1;
                    }
                    continue;
                }
                if !is_ancestor(cfg, q, cur, tip)? {
                    if is_delegate {
                        return Err(ValidationError::DelegateDiverged(nid).into());
                    }
                    tracing::warn!(%rid, namespace = %nid, "ignoring diverged signed refs");
                    on_prune("diverged");
                    outcome
                        .pruned
                        .push((nid, "diverged", "diverged rad/sigrefs".into()));
                    continue;
                }
            }
            None => {}
        }
        // Only signed refs are written, each at its signed oid, and every one of them must be
        // present (data refs are fetched by the oids the signed refs name, never by the peer's
        // own ref listing, so an unsigned ref is never even seen). The namespace's `rad/id`
        // fetched with the special refs must be the signed one.
        let mut ns_lines = Vec::new();
        let mut bad: Option<(&'static str, String)> = None;
        for (name, oid) in &signed.refs {
            if name == "refs/rad/sigrefs-parent" {
                continue; // recorded in the blob only, never a ref
            }
            if let Some(got) = fetched_ref(name) {
                if got != &oid.to_string() {
                    bad = Some((
                        "mismatched_ref",
                        format!("{name} does not match its signed oid"),
                    ));
                    break;
                }
            }
            if !gix_repo.has_object(oid) {
                bad = Some((
                    "missing_ref",
                    format!("signed ref {name} ({oid}) is missing"),
                ));
                break;
            }
            ns_lines.push(format!("update refs/namespaces/{nid}/{name} {oid}"));
        }
        if let Some((label, reason)) = bad {
            tracing::warn!(%rid, namespace = %nid, reason, "pruning namespace");
            on_prune(label);
            outcome.pruned.push((nid, label, reason));
            continue;
        }
        // Refs we hold in that namespace that are no longer signed go away.
        let held = refs_under(live, &format!("refs/namespaces/{nid}/"))?;
        for (name, _) in held {
            let rel = name
                .strip_prefix(&format!("refs/namespaces/{nid}/"))
                .unwrap_or(&name);
            if rel != "refs/rad/sigrefs" && !signed.refs.contains_key(rel) {
                ns_lines.push(format!("delete {name}"));
            }
        }
        ns_lines.push(format!(
            "update refs/namespaces/{nid}/refs/rad/sigrefs {tip}"
        ));
        outcome.refs_written += ns_lines.len();
        lines.extend(ns_lines);
        let mut at = [0u8; 20];
        at.copy_from_slice(tip_id.as_bytes());
        outcome.updated.push((nid, at));
        applied.insert(nid, signed.refs.clone());
        if is_delegate {
            valid_delegates += 1;
        }
    }
    if valid_delegates < threshold {
        return Err(ValidationError::Threshold {
            valid: valid_delegates,
            threshold,
        }
        .into());
    }

    // 3. Canonical refs: rad/id, and the default branch where `threshold` delegates agree.
    // The adopted revision (the fetched head may be a proposal not yet accepted).
    if resolved.adopt {
        lines.push(format!("update refs/rad/id {}", ident.head));
    }
    let default_branch = doc.project().map(|p| p.default_branch);
    if let Some(branch) = &default_branch {
        let mut tips: Vec<String> = Vec::new();
        for d in &doc.delegates {
            let name = format!("refs/heads/{branch}");
            let tip = if let Some(signed) = applied.get(d) {
                signed.get(&name).map(ToString::to_string)
            } else {
                held_ref(live, &format!("refs/namespaces/{d}/{name}"))?
            };
            if let Some(t) = tip {
                tips.push(t);
            }
        }
        let ancestor = |a: &str, b: &str| is_ancestor(cfg, q, a, b).unwrap_or(false);
        if let Some(oid) = quorum(&tips, doc.threshold.max(1), ancestor) {
            lines.push(format!("update refs/heads/{branch} {oid}"));
        }
    }
    // 4. The accepted objects move into the repository, then its refs, all or nothing.
    let tips: Vec<String> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("update "))
        .filter_map(|l| l.split_once(' ').map(|(_, oid)| oid.to_owned()))
        .collect();
    // What serves the repository learns the adopted document's visibility before anything
    // of this fetch is in it (a repository made private with new content in one fetch).
    before_write(doc)?;
    migrate(cfg, q, live, &tips)?;
    transaction(cfg, live, &guarded(&lines, &before))?;
    if let Some(branch) = &default_branch {
        // Almost always already so: read it rather than start a process to rewrite it.
        let target = format!("ref: refs/heads/{branch}");
        let head = std::fs::read_to_string(live.join("HEAD")).unwrap_or_default();
        if head.trim_end() != target {
            let _ = git(cfg, live)
                .args(["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")])
                .status();
        }
    }

    // 5. Canonical refs of `xyz.radicle.crefs` rules (RIP-0004), from the applied state.
    let rules = cref_rules(&doc.payload, &doc.delegates);
    if !rules.is_empty() {
        let skip = default_branch.map(|b| format!("refs/heads/{b}"));
        let before = snapshot(live)?;
        let canonical = canonical_refs(cfg, live, &rules, skip.as_deref())?;
        if !canonical.is_empty() {
            let lines: Vec<String> = canonical
                .iter()
                .map(|(name, oid)| format!("update {name} {oid}"))
                .collect();
            transaction(cfg, live, &guarded(&lines, &before))?;
        }
    }
    Ok(outcome)
}

/// One `xyz.radicle.crefs` rule: which refs, whose votes, how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CrefRule {
    pub pattern: String,
    pub voters: Vec<NodeId>,
    pub threshold: usize,
}

/// Rules of the `xyz.radicle.crefs` payload, most specific first (exact names, then longer
/// literal prefixes). Rules for protected refs (`refs/rad/…`, namespaces) are ignored.
pub(super) fn cref_rules(
    payload: &serde_json::Map<String, serde_json::Value>,
    delegates: &[NodeId],
) -> Vec<CrefRule> {
    let Some(rules) = payload
        .get("xyz.radicle.crefs")
        .and_then(|c| c.get("rules"))
        .and_then(|r| r.as_object())
    else {
        return Vec::new();
    };
    let mut out: Vec<CrefRule> = rules
        .iter()
        .filter(|(p, _)| {
            p.starts_with("refs/")
                && !p.starts_with("refs/rad/")
                && !p.starts_with("refs/namespaces/")
        })
        .filter_map(|(pattern, rule)| {
            let threshold = usize::try_from(rule.get("threshold")?.as_u64()?).ok()?;
            let voters = match rule.get("allow") {
                Some(serde_json::Value::String(s)) if s == "delegates" => delegates.to_vec(),
                Some(serde_json::Value::Array(dids)) => dids
                    .iter()
                    .filter_map(|d| {
                        let d = d.as_str()?;
                        d.strip_prefix("did:key:")
                            .unwrap_or(d)
                            .parse::<NodeId>()
                            .ok()
                    })
                    .collect(),
                None => delegates.to_vec(),
                _ => return None,
            };
            (threshold >= 1 && threshold <= voters.len()).then(|| CrefRule {
                pattern: pattern.clone(),
                voters,
                threshold,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        let lit = |p: &str| p.split('*').next().map_or(0, str::len);
        let exact = |p: &str| !p.contains('*');
        exact(&b.pattern)
            .cmp(&exact(&a.pattern))
            .then(lit(&b.pattern).cmp(&lit(&a.pattern)))
    });
    out
}

/// Git refspec-style matching: a trailing `*` matches everything below; a `*` inside matches
/// any run of characters.
pub(super) fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, "")) => name.starts_with(prefix),
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
        }
    }
}

/// Top-level refs each rule makes canonical: per matching name, the voters' tips in their
/// namespaces; tags need `threshold` identical votes, branches a quorum over ancestry.
fn canonical_refs(
    cfg: &FetchConfig,
    repo: &Path,
    rules: &[CrefRule],
    skip: Option<&str>,
) -> Result<BTreeMap<String, String>, FetchError> {
    let mut tips: BTreeMap<String, Vec<(NodeId, String)>> = BTreeMap::new();
    let voters: std::collections::BTreeSet<NodeId> = rules
        .iter()
        .flat_map(|r| r.voters.iter().copied())
        .collect();
    for nid in voters {
        let prefix = format!("refs/namespaces/{nid}/");
        for (name, oid) in refs_under(repo, &prefix)? {
            if let Some(rel) = name.strip_prefix(&prefix) {
                tips.entry(rel.to_owned()).or_default().push((nid, oid));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (name, votes) in tips {
        if Some(name.as_str()) == skip || name.starts_with("refs/rad/") {
            continue;
        }
        let Some(rule) = rules.iter().find(|r| pattern_matches(&r.pattern, &name)) else {
            continue;
        };
        let candidates: Vec<String> = votes
            .into_iter()
            .filter(|(n, _)| rule.voters.contains(n))
            .map(|(_, o)| o)
            .collect();
        let winner = if name.starts_with("refs/tags/") {
            let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
            for c in &candidates {
                *counts.entry(c).or_default() += 1;
            }
            counts
                .into_iter()
                .filter(|(_, n)| *n >= rule.threshold)
                .max_by_key(|(_, n)| *n)
                .map(|(o, _)| o.clone())
        } else {
            let ancestor = |a: &str, b: &str| is_ancestor(cfg, repo, a, b).unwrap_or(false);
            quorum(&candidates, rule.threshold, ancestor)
        };
        if let Some(oid) = winner {
            out.insert(name, oid);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

impl From<cob::CobError> for ValidationError {
    fn from(e: cob::CobError) -> Self {
        ValidationError::IdentityHistory(e)
    }
}

impl From<identity::IdentityError> for ValidationError {
    fn from(e: identity::IdentityError) -> Self {
        ValidationError::IdentityDocument(e)
    }
}
