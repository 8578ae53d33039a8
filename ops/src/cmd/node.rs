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

/// `seedctl policy ls`.
pub(crate) fn policies(client: &Client) -> anyhow::Result<Box<dyn Report>> {
    Ok(Box::new(
        client.get::<PoliciesResponse>("/api/v1/policies")?,
    ))
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
