//! Label values of families whose values name cases of other rooms' enums (fetch errors,
//! validation failures, HTTP routes, pack admission, p2p offences, links and message types).
//! They are defined here, where every known value is exported at 0 from the start, and the
//! enums map onto them (`label()`/`route()`/`reason()`); the tests in `metrics` check that
//! each enum's values are exactly these lists. So `metrics` depends on no other room.

use seedd_proto::wire::{Link, MessageType};

/// `result` of `seedd_fetches_total` for a failed fetch (`FetchError::label`).
pub const FETCH_ERRORS: &[&str] = &[
    "stream",
    "git",
    "too_large",
    "quota",
    "timeout",
    "deadline",
    "invalid",
    "io",
    "purged",
    "internal",
];

/// `reason` of `seedd_fetch_validation_failures_total` for a refused fetch
/// (`ValidationError::label`).
pub const VALIDATION_FAILURES: &[&str] = &[
    "missing_identity",
    "identity",
    "delegate_diverged",
    "threshold",
];

/// `route` of the git HTTP endpoints (`http::git::Endpoint::route`).
pub const HTTP_ROUTES: &[&str] = &["info_refs", "upload_pack", "receive_pack"];
/// The `route` of requests whose path is not a git URL.
pub const OTHER_ROUTE: &str = "other";
/// Routes whose responses are streamed (bytes and in-flight gauges).
pub const STREAMED_ROUTES: &[&str] = &["info_refs", "upload_pack"];

/// `reason` of a refused pack admission (`serve::Admission::reason`).
pub const ADMISSIONS: &[&str] = &["queue_full", "queue_timeout"];

/// `reason` of `seedd_p2p_penalties_total` (`net::guard::Offence::label`).
pub const OFFENCES: &[&str] = &[
    "decode_error",
    "invalid_signature",
    "invalid_timestamp",
    "handshake",
];

/// `group` of the JSON API families (`web::Group::label`).
pub const WEB_GROUPS: &[&str] = &[
    "node", "repos", "tree", "blob", "history", "commit", "remotes", "raw", "other", "cobs",
    "archive",
];
/// `status` values of `seedd_web_requests_total` the JSON API answers.
pub const WEB_STATUSES: &[&str] = &[
    "200", "204", "400", "403", "404", "405", "413", "429", "500", "503",
];

/// Label of a link direction.
pub fn link_label(link: Link) -> &'static str {
    match link {
        Link::Inbound => "inbound",
        Link::Outbound => "outbound",
    }
}

/// Label of a message type.
pub fn type_label(t: MessageType) -> &'static str {
    match t {
        MessageType::NodeAnnouncement => "node",
        MessageType::InventoryAnnouncement => "inventory",
        MessageType::RefsAnnouncement => "refs",
        MessageType::Subscribe => "subscribe",
        MessageType::Ping => "ping",
        MessageType::Pong => "pong",
        MessageType::Info => "info",
    }
}

/// For the crates' label tests: `samples` (one per enum variant) and a label list are the same
/// set, with no label repeated in the list.
#[cfg(any(test, feature = "testing"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub fn same_labels(samples: &[&'static str], listed: &[&'static str]) {
    let a: std::collections::BTreeSet<_> = samples.iter().copied().collect();
    let b: std::collections::BTreeSet<_> = listed.iter().copied().collect();
    assert_eq!(a, b);
    assert_eq!(b.len(), listed.len(), "repeated label in {listed:?}");
}
