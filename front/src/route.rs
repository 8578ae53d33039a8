//! Which shard a request belongs to, from its path alone (pure).
//!
//! Every URL that names a repository reaches the shard that holds it: git's `/<rid>.git/…`
//! (also `/rad:<rid>.git/…` and a peer's view `/<rid>/<nid>/…`), the explorer's
//! `/api/v1/repos/<rid>…` and `/api/v1/node/policies/repos/<rid>`, and `/raw/<rid>/…`.
//! Node-wide endpoints are answered for the whole fleet; anything else goes to the node shard.

use seedd_proto::crypto::RepoId;

/// The endpoints the front merges over every shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeWide {
    /// `/api/v1/repos` (`show`, `sort`, `page`, `perPage`).
    Repos,
    /// `/api/v1/repos/search` (`q`, `page`, `perPage`).
    Search,
    /// `/api/v1/stats`.
    Stats,
    /// `/api/v1/delegates/<did>/repos`.
    DelegateRepos,
    /// `/api/v1/node/policies/repos`.
    Policies,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// A repository's URL: its shard.
    Repo { rid: RepoId, kind: Kind },
    /// Merged over the shards.
    NodeWide(NodeWide),
    /// The node shard (`/api/v1/node`, `/api`, unknown paths, git aliases).
    Node,
}

/// The kind of a repository URL (the `route` label of the front's metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Git,
    Api,
    Raw,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Git => "git",
            Kind::Api => "api",
            Kind::Raw => "raw",
        }
    }
}

/// Classify a request path (without the query).
pub fn classify(path: &str) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["api", "v1", "repos"] => Route::NodeWide(NodeWide::Repos),
        ["api", "v1", "repos", "search"] => Route::NodeWide(NodeWide::Search),
        ["api", "v1", "stats"] => Route::NodeWide(NodeWide::Stats),
        ["api", "v1", "delegates", _, "repos"] => Route::NodeWide(NodeWide::DelegateRepos),
        ["api", "v1", "node", "policies", "repos"] => Route::NodeWide(NodeWide::Policies),
        ["api", "v1", "node", "policies", "repos", rid] => repo(rid, Kind::Api),
        ["api", "v1", "repos", rid, ..] => repo(rid, Kind::Api),
        ["api", ..] => Route::Node,
        ["raw", rid, _, ..] => repo(rid, Kind::Raw),
        [first, _, ..] => {
            let name = first.strip_suffix(".git").unwrap_or(first);
            repo(name, Kind::Git)
        }
        _ => Route::Node,
    }
}

fn repo(s: &str, kind: Kind) -> Route {
    let s = ["rad:", "rad%3A", "rad%3a"]
        .iter()
        .find_map(|p| s.strip_prefix(p))
        .unwrap_or(s);
    match s.parse::<RepoId>() {
        Ok(rid) => Route::Repo { rid, kind },
        // A git alias (`/<name>.git`) or a malformed RID: the node shard answers (aliases
        // work on hosts placed on their own shard, `[hosts]`).
        Err(_) => Route::Node,
    }
}

/// Whether a request is a git `fetch`/`ls-refs` POST whose empty answer means the replica
/// lacked what was asked (then the next replica is tried).
pub fn is_upload_pack(method: &hyper::Method, path: &str) -> bool {
    method == hyper::Method::POST && path.ends_with("/git-upload-pack")
}

#[cfg(test)]
mod tests {
    use super::*;

    const RID: &str = "z3gqcJUoA1n9HaHKufZs5FCSGazv5";

    #[test]
    fn repository_urls_name_their_repository() {
        let rid: RepoId = RID.parse().unwrap();
        let git = |p: &str| classify(p);
        for p in [
            format!("/{RID}.git/info/refs"),
            format!("/rad:{RID}.git/git-upload-pack"),
            format!("/rad%3A{RID}/git-upload-pack"),
            format!("/{RID}/z6MkfXa53s1ZSFy8rktvyXt5ADCojnxvjAoQpzajaXyLqG5n.git/info/refs"),
        ] {
            assert_eq!(
                git(&p),
                Route::Repo {
                    rid,
                    kind: Kind::Git
                },
                "{p}"
            );
        }
        for p in [
            format!("/api/v1/repos/rad:{RID}"),
            format!("/api/v1/repos/rad:{RID}/tree/abc/src/lib.rs"),
            format!("/api/v1/node/policies/repos/rad:{RID}"),
        ] {
            assert_eq!(
                git(&p),
                Route::Repo {
                    rid,
                    kind: Kind::Api
                },
                "{p}"
            );
        }
        assert_eq!(
            classify(&format!("/raw/rad:{RID}/abc/README")),
            Route::Repo {
                rid,
                kind: Kind::Raw
            }
        );
    }

    #[test]
    fn node_wide_and_other_urls() {
        assert_eq!(classify("/api/v1/repos"), Route::NodeWide(NodeWide::Repos));
        assert_eq!(classify("/api/v1/repos/"), Route::NodeWide(NodeWide::Repos));
        assert_eq!(
            classify("/api/v1/repos/search"),
            Route::NodeWide(NodeWide::Search)
        );
        assert_eq!(classify("/api/v1/stats"), Route::NodeWide(NodeWide::Stats));
        assert_eq!(
            classify("/api/v1/delegates/did:key:z6Mk/repos"),
            Route::NodeWide(NodeWide::DelegateRepos)
        );
        assert_eq!(
            classify("/api/v1/node/policies/repos"),
            Route::NodeWide(NodeWide::Policies)
        );
        for p in [
            "/",
            "/api",
            "/api/v1",
            "/api/v1/node",
            "/api/v1/nodes/z6Mk",
            "/alias.git/info/refs",
            "/api/v1/repos/notarid",
            "/raw/x",
        ] {
            assert_eq!(classify(p), Route::Node, "{p}");
        }
    }
}
