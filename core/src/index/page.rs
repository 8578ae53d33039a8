//! Paged reads of the repository records (`GET /api/v1/repos`): a page is read straight from
//! RocksDB with an iterator that starts after the cursor, so it costs the page, not the index.
//! The cursor is the last RID of the previous page; a RID deleted between two pages still
//! works (the iterator seeks to the next key).

use seedd_proto::crypto::RepoId;

use super::{values, Index, IndexError, RepoRecord, CF_REPOS};

/// One page of a listing in key order.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T, C> {
    pub items: Vec<T>,
    /// The last key of this page when more follow (the next page's `after`).
    pub next: Option<C>,
}

/// Takes up to `limit` items from `keys` (sorted ascending) that sort strictly after `after`;
/// `next` is the last one taken if another follows. Reads at most `limit + 1` items.
pub(crate) fn take_page<K, T, E>(
    items: impl Iterator<Item = Result<(K, T), E>>,
    after: Option<&K>,
    limit: usize,
) -> Result<Page<T, K>, E>
where
    K: PartialOrd,
{
    let mut out = Vec::new();
    let mut last: Option<K> = None;
    for item in items {
        let (key, value) = item?;
        if after.is_some_and(|a| key <= *a) {
            continue;
        }
        if out.len() == limit {
            return Ok(Page {
                items: out,
                next: last,
            });
        }
        last = Some(key);
        out.push(value);
    }
    Ok(Page {
        items: out,
        next: None,
    })
}

impl Index {
    /// Up to `limit` repository records with RIDs after `after`, in RID order, and the cursor of
    /// the next page. Only the page's records are decoded.
    pub fn repos_page(
        &self,
        after: Option<&RepoId>,
        limit: usize,
    ) -> Result<Page<RepoRecord, RepoId>, IndexError> {
        let mode = match after {
            Some(rid) => rocksdb::IteratorMode::From(rid.as_bytes(), rocksdb::Direction::Forward),
            None => rocksdb::IteratorMode::Start,
        };
        let iter = self.db.iterator_cf(self.cf(CF_REPOS)?, mode);
        let keyed = iter.map(|item| {
            let (k, v) = item?;
            Ok::<_, IndexError>((k.clone(), (k, v)))
        });
        let after_key: Option<Box<[u8]>> = after.map(|r| r.as_bytes().to_vec().into_boxed_slice());
        let raw = take_page(keyed, after_key.as_ref(), limit)?;
        let items = raw
            .items
            .iter()
            .map(|(k, v)| values::decode(k, v))
            .collect::<Result<Vec<_>, _>>()?;
        let next = match raw.next {
            Some(k) => Some(rid_key(&k)?),
            None => None,
        };
        Ok(Page { items, next })
    }

    /// The records of `rids` (sorted ascending) after `after`, up to `limit` of them found in
    /// the index, by point lookups (a tenant's repositories: the page costs the page). Rids
    /// not in the index are skipped.
    pub fn repos_of_page(
        &self,
        rids: &[RepoId],
        after: Option<&RepoId>,
        limit: usize,
    ) -> Result<Page<RepoRecord, RepoId>, IndexError> {
        let start = after.map_or(0, |a| rids.partition_point(|r| r <= a));
        let found = rids[start..].iter().filter_map(|rid| match self.repo(rid) {
            Ok(Some(r)) => Some(Ok((*rid, r))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        });
        take_page(found, None, limit)
    }
}

fn rid_key(k: &[u8]) -> Result<RepoId, IndexError> {
    <[u8; 20]>::try_from(k)
        .map(RepoId::from_oid_bytes)
        .map_err(|_| IndexError::Corrupt {
            cf: CF_REPOS,
            key: None,
            reason: format!("key of {} bytes, not a 20-byte RID", k.len()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Visibility;

    fn ok<K, T>(v: Vec<(K, T)>) -> impl Iterator<Item = Result<(K, T), ()>> {
        v.into_iter().map(Ok)
    }

    #[test]
    fn take_page_stops_after_limit_and_names_the_next_cursor() {
        let keys: Vec<(u32, u32)> = (1..=5).map(|k| (k * 10, k)).collect();
        let p = take_page(ok(keys.clone()), None, 2).unwrap();
        assert_eq!(
            p,
            Page {
                items: vec![1, 2],
                next: Some(20)
            }
        );
        let p = take_page(ok(keys.clone()), Some(&20), 2).unwrap();
        assert_eq!(
            p,
            Page {
                items: vec![3, 4],
                next: Some(40)
            }
        );
        // The last page has no cursor, also when it is exactly full.
        let p = take_page(ok(keys.clone()), Some(&30), 2).unwrap();
        assert_eq!(
            p,
            Page {
                items: vec![4, 5],
                next: None
            }
        );
        // A cursor between keys (its key was deleted) starts at the next one.
        let p = take_page(ok(keys.clone()), Some(&25), 10).unwrap();
        assert_eq!(p.items, vec![3, 4, 5]);
        // After the end, or nothing at all.
        assert_eq!(
            take_page(ok(keys.clone()), Some(&50), 3).unwrap().items,
            Vec::<u32>::new()
        );
        assert_eq!(
            take_page(ok(Vec::<(u32, u32)>::new()), None, 3).unwrap(),
            Page {
                items: vec![],
                next: None
            }
        );
        // An error stops the walk.
        let failing = vec![Ok((1, 1)), Err("bad"), Ok((3, 3))].into_iter();
        assert_eq!(take_page(failing, None, 5), Err("bad"));
    }

    fn record(rid: RepoId) -> RepoRecord {
        RepoRecord {
            rid,
            name: "r".into(),
            description: String::new(),
            default_branch: "main".into(),
            delegates: vec![],
            threshold: 1,
            visibility: Visibility::Public,
            identity_head: "0".repeat(40),
            head: None,
            fingerprint: String::new(),
            ref_count: 0,
            namespaces: vec![],
            indexed_at: 0,
        }
    }

    #[test]
    fn repos_page_walks_every_record_once_in_rid_order() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let mut rids: Vec<RepoId> = (0..25u8)
            .map(|i| RepoId::from_oid_bytes([i.wrapping_mul(37); 20]))
            .collect();
        for rid in &rids {
            index.put_repo(&record(*rid), &[], &[]).unwrap();
        }
        rids.sort();
        for limit in [1, 7, 10, 25, 100] {
            let mut seen = Vec::new();
            let mut after = None;
            let mut pages = 0;
            loop {
                let page = index.repos_page(after.as_ref(), limit).unwrap();
                assert!(page.items.len() <= limit);
                seen.extend(page.items.iter().map(|r| r.rid));
                pages += 1;
                match page.next {
                    Some(n) => {
                        assert_eq!(Some(&n), seen.last());
                        after = Some(n);
                    }
                    None => break,
                }
            }
            assert_eq!(seen, rids, "limit {limit}");
            assert_eq!(pages, rids.len().div_ceil(limit), "limit {limit}");
        }
        // The cursor's repository removed between two pages: the walk goes on after it.
        let page = index.repos_page(None, 10).unwrap();
        let cursor = page.next.unwrap();
        index.remove_repo(&cursor).unwrap();
        let page = index.repos_page(Some(&cursor), 100).unwrap();
        assert_eq!(page.items.first().map(|r| r.rid), Some(rids[10]));
        assert_eq!(page.items.len(), 15);
        // A tenant's repositories: only indexed ones, by point lookups, same cursor rules.
        let unknown = RepoId::from_oid_bytes([0xfe; 20]);
        assert_eq!(cursor, rids[9]);
        let mut mine = vec![rids[3], rids[12], unknown, rids[20], cursor];
        mine.sort();
        let p = index.repos_of_page(&mine, None, 2).unwrap();
        assert_eq!(
            p.items.iter().map(|r| r.rid).collect::<Vec<_>>(),
            vec![rids[3], rids[12]]
        );
        assert_eq!(p.next, Some(rids[12]));
        let p = index.repos_of_page(&mine, p.next.as_ref(), 2).unwrap();
        assert_eq!(
            p.items.iter().map(|r| r.rid).collect::<Vec<_>>(),
            vec![rids[20]]
        );
        assert_eq!(p.next, None);
    }
}
