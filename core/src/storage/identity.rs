//! The identity document (protocol.md §1.3) as stored in the identity COB (§1.4).

use serde::Deserialize;

use seedd_proto::crypto::NodeId;

/// Largest identity document we parse (radicle caps names/descriptions at 255 bytes and
/// delegates at 255; 64 KiB is generous).
const MAX_DOC_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("no refs/rad/id")]
    Missing,
    #[error("git: {0}")]
    Git(super::GitError),
    #[error("identity commit has no embeds/radicle.json")]
    NoDocument,
    #[error("document is {0} bytes, over the {MAX_DOC_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("document is not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error("unsupported document version {0}")]
    Version(u64),
    #[error("delegates: {0} delegates; expected 1 to 255")]
    DelegateCount(usize),
    #[error("delegates: {prefix}{did}: {cause}")]
    BadDid {
        /// `allow ` for an entry of the allow list, empty for a delegate.
        prefix: &'static str,
        did: String,
        cause: Box<seedd_proto::crypto::CryptoError>,
    },
    #[error("threshold {threshold} not within 1..={delegates}")]
    Threshold { threshold: usize, delegates: usize },
    #[error("visibility: unknown type {0:?}")]
    Visibility(String),
}

/// Who may see a repository.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Visibility {
    Public,
    Private {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allow: Vec<NodeId>,
    },
}

impl Visibility {
    pub fn is_public(&self) -> bool {
        matches!(self, Visibility::Public)
    }
}

/// `xyz.radicle.project` payload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub default_branch: String,
}

/// A parsed identity document.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Doc {
    pub payload: serde_json::Map<String, serde_json::Value>,
    pub delegates: Vec<NodeId>,
    pub threshold: usize,
    pub visibility: Visibility,
}

impl Doc {
    /// Parse stored document bytes. Parsing is lenient about formatting (the blob id of the stored
    /// bytes is what counts), strict about meaning.
    pub fn from_json(bytes: &[u8]) -> Result<Self, IdentityError> {
        if bytes.len() > MAX_DOC_BYTES {
            return Err(IdentityError::TooLarge(bytes.len()));
        }
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            version: Option<u64>,
            payload: serde_json::Map<String, serde_json::Value>,
            delegates: Vec<String>,
            threshold: usize,
            #[serde(default)]
            visibility: Option<RawVisibility>,
        }
        #[derive(Deserialize)]
        struct RawVisibility {
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            allow: Vec<String>,
        }
        let raw: Raw = serde_json::from_slice(bytes)?;
        if let Some(v) = raw.version {
            if v != 1 {
                return Err(IdentityError::Version(v));
            }
        }
        if raw.delegates.is_empty() || raw.delegates.len() > 255 {
            return Err(IdentityError::DelegateCount(raw.delegates.len()));
        }
        let mut delegates = Vec::with_capacity(raw.delegates.len());
        for d in &raw.delegates {
            let nid = NodeId::from_did(d).map_err(|source| IdentityError::BadDid {
                prefix: "",
                did: d.clone(),
                cause: Box::new(source),
            })?;
            if !delegates.contains(&nid) {
                delegates.push(nid);
            }
        }
        if raw.threshold == 0 || raw.threshold > delegates.len() {
            return Err(IdentityError::Threshold {
                threshold: raw.threshold,
                delegates: delegates.len(),
            });
        }
        let visibility = match raw.visibility {
            None => Visibility::Public,
            Some(v) if v.kind == "public" => Visibility::Public,
            Some(v) if v.kind == "private" => {
                let mut allow = Vec::with_capacity(v.allow.len());
                for d in &v.allow {
                    allow.push(NodeId::from_did(d).map_err(|source| IdentityError::BadDid {
                        prefix: "allow ",
                        did: d.clone(),
                        cause: Box::new(source),
                    })?);
                }
                Visibility::Private { allow }
            }
            Some(v) => return Err(IdentityError::Visibility(v.kind)),
        };
        Ok(Doc {
            payload: raw.payload,
            delegates,
            threshold: raw.threshold,
            visibility,
        })
    }

    /// The `xyz.radicle.project` payload, if present and well-formed: a `defaultBranch` that
    /// is not a valid git branch name (`refs/heads/<it>` by git's rules: no `..`, control
    /// characters, spaces, `~^:?*[\`, leading `-` …) makes it malformed, as radicle's
    /// `BranchName` does — it is joined into ref names and `update-ref` input.
    pub fn project(&self) -> Option<Project> {
        let value = self.payload.get("xyz.radicle.project")?;
        let project: Project = serde_json::from_value(value.clone()).ok()?;
        valid_branch(&project.default_branch).then_some(project)
    }
}

/// Whether `name` is a valid branch name: `refs/heads/<name>` is a valid ref name, and `name`
/// is neither empty nor starts with `-` (git's `check-ref-format --branch`).
pub(crate) fn valid_branch(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && gix::validate::reference::branch_name(format!("refs/heads/{name}").as_str().into())
            .is_ok()
}

/// The identity as read from storage: the document plus where it came from.
#[derive(Debug, Clone)]
pub struct Identity {
    pub doc: Doc,
    /// Identity COB commit that `refs/rad/id` points to.
    pub head: gix::ObjectId,
    /// Blob id of the document bytes at that commit.
    pub blob: gix::ObjectId,
}

/// Read the document embedded at `embeds/radicle.json` of the identity commit `head`.
pub fn read(git: &gix::Repository, head: gix::ObjectId) -> Result<Identity, IdentityError> {
    let commit = git
        .find_commit(head)
        .map_err(|e| IdentityError::Git(super::GitError::new(e)))?;
    let tree = commit
        .tree()
        .map_err(|e| IdentityError::Git(super::GitError::new(e)))?;
    let entry = tree
        .lookup_entry_by_path("embeds/radicle.json")
        .map_err(|e| IdentityError::Git(super::GitError::new(e)))?
        .ok_or(IdentityError::NoDocument)?;
    let blob_id = entry.object_id();
    let blob = git
        .find_blob(blob_id)
        .map_err(|e| IdentityError::Git(super::GitError::new(e)))?;
    let doc = Doc::from_json(&blob.data)?;
    Ok(Identity {
        doc,
        head,
        blob: blob_id,
    })
}

impl From<serde_json::Error> for IdentityError {
    fn from(e: serde_json::Error) -> Self {
        IdentityError::Json(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"delegates":["did:key:z6MknSLrJoTcukLrE435hVNQT4JUhbvWLX4kUzqkEStBU8Vi"],"payload":{"xyz.radicle.project":{"defaultBranch":"master","description":"Radicle Heartwood Protocol & Stack","name":"heartwood"}},"threshold":1}"#;

    #[test]
    fn parses_the_canonical_example() {
        let doc = Doc::from_json(DOC.as_bytes()).unwrap();
        assert_eq!(doc.threshold, 1);
        assert!(doc.visibility.is_public());
        let p = doc.project().unwrap();
        assert_eq!(p.name, "heartwood");
        assert_eq!(p.default_branch, "master");
        assert_eq!(
            doc.delegates[0].to_string(),
            "z6MknSLrJoTcukLrE435hVNQT4JUhbvWLX4kUzqkEStBU8Vi"
        );
    }

    /// A `defaultBranch` that is not a valid branch name makes the project payload malformed
    /// (no project), as radicle's `BranchName` does; valid nested names are kept.
    #[test]
    fn an_invalid_default_branch_is_no_project() {
        let with = |branch: &str| {
            let doc = DOC.replace("\"master\"", &serde_json::to_string(branch).unwrap());
            Doc::from_json(doc.as_bytes()).unwrap().project()
        };
        for ok in ["main", "release/1.x", "feature-x"] {
            assert_eq!(with(ok).map(|p| p.default_branch), Some(ok.to_owned()));
        }
        for bad in [
            "",
            "../x",
            "a..b",
            "ma in",
            "main\nrefs/heads/x",
            "-main",
            "main.lock",
            "x~1",
            "a:b",
            "HEAD",
            "/main",
            "main/",
            "a//b",
            "@{u}",
            "x\u{7f}",
        ] {
            assert!(with(bad).is_none(), "{bad:?} accepted");
        }
    }

    #[test]
    fn private_visibility_is_read() {
        let text = DOC.replace(
            "\"threshold\":1}",
            "\"threshold\":1,\"visibility\":{\"type\":\"private\"}}",
        );
        let doc = Doc::from_json(text.as_bytes()).unwrap();
        assert_eq!(doc.visibility, Visibility::Private { allow: vec![] });
    }

    #[test]
    fn bad_documents_are_rejected() {
        for bad in [
            DOC.replace("\"threshold\":1", "\"threshold\":2"),
            DOC.replace("\"threshold\":1", "\"threshold\":0"),
            DOC.replace("did:key:z6Mkn", "did:key:z6Mkx"),
            DOC.replace("{\"delegates\"", "{\"version\":2,\"delegates\""),
            DOC.replace(
                "\"threshold\":1}",
                "\"threshold\":1,\"visibility\":{\"type\":\"secret\"}}",
            ),
            "{".to_owned(),
        ] {
            assert!(Doc::from_json(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
