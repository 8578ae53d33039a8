//! CI jobs (`xyz.radworks.job`, the `radicle-job` 0.6 crate that radicle-httpd 0.27 reads for
//! `/repos/{rid}/jobs/{sha}`): a job is created for one commit (`Request`), then any node adds
//! its runs (`Run`) and finishes them (`Finished`). There is no authorisation: every node's runs
//! are its own (keyed by the change's signer). A change whose action does not decode is pruned.
//!
//! Actions are serde's externally tagged enum: `{"Request":{"oid":…}}`,
//! `{"Run":{"uuid":…,"log":…}}`, `{"Finished":{"uuid":…,"reason":"Failed"|"Succeeded"}}`.
//! radicle also refuses a job whose commit is missing from the repository; the web handler
//! answers `[]` for a commit it does not have, which shows the same.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::evaluate::{Cob, Op, OpError, Repo};
use seedd_proto::crypto::NodeId;

/// COB type name of jobs (`radicle_job::TYPENAME`).
pub const TYPE_NAME: &str = "xyz.radworks.job";

/// How a run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Reason {
    Failed,
    Succeeded,
}

/// A run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Started,
    Finished(Reason),
}

impl Status {
    /// httpd's `status`: `started`, `failed`, `succeeded`.
    pub fn label(self) -> &'static str {
        match self {
            Status::Started => "started",
            Status::Finished(Reason::Failed) => "failed",
            Status::Finished(Reason::Succeeded) => "succeeded",
        }
    }
}

/// A UUID as `uuid`'s serde accepts it (hyphenated, simple, `urn:uuid:`, braced), kept in
/// its hyphenated lower-case form (how httpd writes `runId`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Uuid(String);

impl Uuid {
    pub fn parse(s: &str) -> Option<Uuid> {
        let s = s.strip_prefix("urn:uuid:").unwrap_or(s);
        let s = s
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .unwrap_or(s);
        let hex: String = match s.len() {
            32 => s.to_owned(),
            36 if [8, 13, 18, 23].iter().all(|&i| s.as_bytes()[i] == b'-') => {
                s.chars().filter(|c| *c != '-').collect()
            }
            _ => return None,
        };
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let h = hex.to_ascii_lowercase();
        Some(Uuid(format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Uuid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Uuid::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("invalid UUID {s:?}")))
    }
}

/// An absolute URL (`scheme:…`), as `url::Url` requires of `log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogUrl(pub(crate) String);

impl<'de> Deserialize<'de> for LogUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let scheme_ok = s.split_once(':').is_some_and(|(scheme, _)| {
            let mut b = scheme.bytes();
            b.next().is_some_and(|c| c.is_ascii_alphabetic())
                && b.all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))
        });
        if scheme_ok && !s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Ok(LogUrl(s))
        } else {
            Err(serde::de::Error::custom(format!("invalid URL {s:?}")))
        }
    }
}

#[derive(Debug, Deserialize)]
pub enum Action {
    Request { oid: String },
    Run { uuid: Uuid, log: LogUrl },
    Finished { uuid: Uuid, reason: Reason },
}

/// One run of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub id: Uuid,
    pub status: Status,
    pub log: String,
    /// The last op that touched it (seconds).
    pub timestamp: u64,
}

/// A job: its commit and every node's runs (in the order they were added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub commit: gix::ObjectId,
    pub runs: BTreeMap<NodeId, Vec<Run>>,
}

impl Job {
    fn action(&mut self, node: NodeId, action: Action, timestamp: u64) {
        match action {
            // Only the root's request counts.
            Action::Request { .. } => {}
            Action::Run { uuid, log } => {
                let runs = self.runs.entry(node).or_default();
                if !runs.iter().any(|r| r.id == uuid) {
                    runs.push(Run {
                        id: uuid,
                        status: Status::Started,
                        log: log.0,
                        timestamp,
                    });
                }
            }
            Action::Finished { uuid, reason } => {
                if let Some(run) = self
                    .runs
                    .get_mut(&node)
                    .and_then(|runs| runs.iter_mut().find(|r| r.id == uuid))
                {
                    run.status = Status::Finished(reason);
                    run.timestamp = timestamp;
                }
            }
        }
    }

    /// Whether any node has a run (httpd 0.27 leaves jobs without runs out).
    pub fn has_runs(&self) -> bool {
        self.runs.values().any(|r| !r.is_empty())
    }
}

impl Cob for Job {
    type Action = Action;

    fn from_root(op: Op<Action>, _repo: &dyn Repo) -> Result<Self, OpError> {
        let mut actions = op.actions.into_iter();
        let Some(Action::Request { oid }) = actions.next() else {
            return Err(OpError::Init("a job starts with a request"));
        };
        let commit = gix::ObjectId::from_hex(oid.as_bytes())
            .map_err(|_| OpError::Init("a job's commit is not an object id"))?;
        let mut job = Job {
            commit,
            runs: BTreeMap::new(),
        };
        for a in actions {
            job.action(op.author, a, op.timestamp);
        }
        Ok(job)
    }

    fn apply(&mut self, op: Op<Action>, _repo: &dyn Repo) -> Result<(), OpError> {
        for a in op.actions {
            self.action(op.author, a, op.timestamp);
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn actions_decode_as_radicle_job_writes_them() {
        let a: Action = serde_json::from_str(
            r#"{"Request":{"oid":"0123456789abcdef0123456789abcdef01234567"}}"#,
        )
        .unwrap();
        assert!(matches!(a, Action::Request { .. }));
        let a: Action = serde_json::from_str(
            r#"{"Run":{"uuid":"67E55044-10B1-426F-9247-BB680E5FE0C8","log":"https://ci.example/log/1"}}"#,
        )
        .unwrap();
        match a {
            Action::Run { uuid, log } => {
                assert_eq!(uuid.as_str(), "67e55044-10b1-426f-9247-bb680e5fe0c8");
                assert_eq!(log.0, "https://ci.example/log/1");
            }
            other => panic!("{other:?}"),
        }
        let a: Action = serde_json::from_str(
            r#"{"Finished":{"uuid":"67e5504410b1426f9247bb680e5fe0c8","reason":"Succeeded"}}"#,
        )
        .unwrap();
        assert!(matches!(
            a,
            Action::Finished {
                reason: Reason::Succeeded,
                ..
            }
        ));
        for bad in [
            r#"{"Run":{"uuid":"nope","log":"https://x/"}}"#,
            r#"{"Run":{"uuid":"67e5504410b1426f9247bb680e5fe0c8","log":"not a url"}}"#,
            r#"{"Finished":{"uuid":"67e5504410b1426f9247bb680e5fe0c8","reason":"Maybe"}}"#,
            r#"{"type":"run"}"#,
        ] {
            assert!(serde_json::from_str::<Action>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn runs_start_finish_and_ignore_repeats_and_strangers() {
        let commit = gix::ObjectId::from_bytes_or_panic(&[1; 20]);
        let alice = NodeId::from_bytes([1; 32]);
        let bob = NodeId::from_bytes([2; 32]);
        let mut job = Job {
            commit,
            runs: BTreeMap::new(),
        };
        assert!(!job.has_runs());
        let u1 = Uuid::parse("00000000-0000-0000-0000-000000000001").unwrap();
        let u2 = Uuid::parse("00000000-0000-0000-0000-000000000002").unwrap();
        let log = || LogUrl("https://ci/1".into());
        job.action(
            alice,
            Action::Run {
                uuid: u1.clone(),
                log: log(),
            },
            10,
        );
        job.action(
            alice,
            Action::Run {
                uuid: u1.clone(),
                log: LogUrl("https://other".into()),
            },
            11,
        );
        job.action(
            alice,
            Action::Run {
                uuid: u2.clone(),
                log: log(),
            },
            12,
        );
        // Bob cannot finish Alice's run.
        job.action(
            bob,
            Action::Finished {
                uuid: u1.clone(),
                reason: Reason::Failed,
            },
            13,
        );
        job.action(
            alice,
            Action::Finished {
                uuid: u2.clone(),
                reason: Reason::Succeeded,
            },
            14,
        );
        assert!(job.has_runs());
        let runs = &job.runs[&alice];
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].id, u1);
        assert_eq!(runs[0].status.label(), "started");
        assert_eq!(runs[0].log, "https://ci/1");
        assert_eq!(runs[1].status.label(), "succeeded");
        assert_eq!(runs[1].timestamp, 14);
        assert!(!job.runs.contains_key(&bob));
        assert_eq!(Status::Finished(Reason::Failed).label(), "failed");
    }
}
