//! Git objects as the JSON API reads them, shared by source browsing (`source`) and diffs
//! (`diff`): a tree's size checked from its header before it is inflated, a blob as
//! `{id, binary, content}`.

use gix::ObjectId;
use seedd_web_api::BlobContent;

use super::WebError;

/// A tree object (its header's size, checked before it is inflated) larger than this is not
/// listed, looked into or diffed: 413. 4 MiB holds ~100k entries of short names.
pub(super) const MAX_TREE_OBJECT: u64 = 4 << 20;

/// 413 if the tree object `id` is over [`MAX_TREE_OBJECT`], read from its header (nothing
/// inflated).
pub(super) fn check_tree_size(repo: &gix::Repository, id: ObjectId) -> Result<(), WebError> {
    let size = repo.find_header(id).map_err(WebError::git)?.size();
    if size > MAX_TREE_OBJECT {
        return Err(WebError::TooLarge {
            what: "tree object",
            limit: MAX_TREE_OBJECT,
        });
    }
    Ok(())
}

/// `{id, binary, content}`: text as is, other bytes base64.
pub(super) fn blob_content(id: ObjectId, bytes: &[u8]) -> BlobContent {
    let (binary, content) = encode(bytes);
    BlobContent {
        id: id.to_string(),
        binary,
        content,
    }
}

pub(super) fn encode(bytes: &[u8]) -> (bool, String) {
    match std::str::from_utf8(bytes) {
        Ok(s) if !bytes.contains(&0) => (false, s.to_owned()),
        _ => {
            use base64::Engine as _;
            (
                true,
                base64::engine::general_purpose::STANDARD.encode(bytes),
            )
        }
    }
}
