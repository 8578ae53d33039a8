//! `seedctl node follow|unfollow|block|unblock`, `seedctl policy ls`.

use seedd_api::{NodePolicy, NodePolicyRequest, NodePolicyResponse, PoliciesResponse, RepoPolicy};
use serde::Serialize;

use crate::cli::NodeCommand;
use crate::client::Client;
use crate::report::{or_dash, Report, Text};

pub(crate) fn run(client: &Client, command: &NodeCommand) -> anyhow::Result<Box<dyn Report>> {
    let (nid, action, alias) = match command {
        NodeCommand::Follow { nid, alias } => (nid, "follow", alias.clone()),
        NodeCommand::Unfollow { nid } => (nid, "unfollow", None),
        NodeCommand::Block { nid } => (nid, "block", None),
        NodeCommand::Unblock { nid } => (nid, "unblock", None),
    };
    let answer = client.post_json::<NodePolicyResponse>(
        &format!("/api/v1/nodes/{nid}/{action}"),
        &NodePolicyRequest { alias },
    )?;
    Ok(Box::new(NodeChanged { answer, action }))
}

/// `seedctl policy ls [--limit L] [--after C]`.
pub(crate) fn policies(
    client: &Client,
    page: &crate::cli::PageArgs,
) -> anyhow::Result<Box<dyn Report>> {
    let limit = page.limit.map(|l| l.to_string());
    let answer = crate::client::all_pages(
        page,
        |after| {
            client.get::<PoliciesResponse>(&crate::client::with_query(
                "/api/v1/policies",
                &[("limit", limit.as_deref()), ("after", after)],
            ))
        },
        |all, more| {
            all.repos.extend(more.repos);
            all.nodes.extend(more.nodes);
            all.next = None;
            more.next
        },
        |r| r.next.clone(),
    )?;
    Ok(Box::new(answer))
}

/// The answer to a node policy change, and which one it was.
#[derive(Serialize)]
#[serde(transparent)]
struct NodeChanged {
    answer: NodePolicyResponse,
    #[serde(skip)]
    action: &'static str,
}

impl Text for NodeChanged {
    fn text(&self) -> String {
        format!("{} {}", self.action, self.answer.nid)
    }
}

impl Text for PoliciesResponse {
    fn text(&self) -> String {
        let mut t = format!(
            "{:<6} {:<50} {:<8} {}",
            "KIND", "ID", "POLICY", "SCOPE/ALIAS"
        );
        for r in &self.repos {
            let (policy, scope) = match r.policy {
                RepoPolicy::Allow { scope } => ("allow", scope.as_str()),
                RepoPolicy::Block => ("block", "-"),
            };
            t.push_str(&format!(
                "\n{:<6} {:<50} {:<8} {}",
                "repo", r.rid, policy, scope
            ));
        }
        for n in &self.nodes {
            let (policy, alias) = match &n.policy {
                NodePolicy::Allow { alias } => ("allow", or_dash(alias.as_deref())),
                NodePolicy::Block => ("block", "-"),
            };
            t.push_str(&format!(
                "\n{:<6} {:<50} {:<8} {}",
                "node", n.nid, policy, alias
            ));
        }
        t
    }
}
