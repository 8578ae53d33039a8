//! Node-wide answers for the whole fleet, merged from every shard's (pure).
//!
//! Each shard answers its part in the explorer's order; the front takes the first
//! `skip + take` of every shard (the most any merged window can need), merges them in that same
//! order and cuts the window, so page `p` of the fleet is exactly what one seed holding every
//! repository would answer. The front asks for at most [`MAX_DEPTH`] entries per shard.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use serde_json::Value;

use seedd_proto::crypto::RepoId;

/// The deepest merged window (`(page + 1) × perPage`): deeper pages cost every shard that
/// many entries, so they are refused (search narrows instead).
pub const MAX_DEPTH: usize = 1000;
/// A shard's page size when the front collects (the seeds' `MAX_PER_PAGE`).
pub const SHARD_PAGE: usize = 100;

/// `sort` of `/api/v1/repos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Rid,
    Seeding,
}

/// The query of a merged listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub pinned: bool,
    pub sort: Sort,
    pub skip: usize,
    pub take: usize,
    /// `q` of a search.
    pub q: String,
}

impl Default for ListQuery {
    /// The seeds' defaults: `show=pinned`, `sort=rid`, the first page of 10.
    fn default() -> Self {
        ListQuery {
            pinned: true,
            sort: Sort::Rid,
            skip: 0,
            take: 10,
            q: String::new(),
        }
    }
}

impl ListQuery {
    /// From a query string (`show`, `sort`, `page`, `perPage`, `q`), as the seeds read it:
    /// `show` defaults to pinned, `perPage` to 10 and at most 100.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut q = ListQuery::default();
        let (mut page, mut per_page) = (0usize, 10usize);
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let v = decode(v);
            let num = |v: &str| {
                v.parse::<usize>()
                    .map_err(|_| format!("{k}: expected a number, got {v:?}"))
            };
            match k {
                "show" => {
                    q.pinned = match v.as_str() {
                        "pinned" => true,
                        "all" => false,
                        _ => return Err(format!("show: expected pinned or all, got {v:?}")),
                    }
                }
                "sort" => {
                    q.sort = match v.as_str() {
                        "rid" | "activity" => Sort::Rid,
                        "seeding" => Sort::Seeding,
                        _ => {
                            return Err(format!(
                                "sort: expected rid, activity or seeding, got {v:?}"
                            ))
                        }
                    }
                }
                "page" => page = num(&v)?,
                "perPage" => per_page = num(&v)?.min(SHARD_PAGE),
                "q" => q.q = v,
                _ => {}
            }
        }
        q.take = per_page;
        q.skip = page.saturating_mul(per_page);
        if q.skip.saturating_add(q.take) > MAX_DEPTH {
            return Err(format!(
                "page {page} of {per_page} is deeper than the fleet lists ({MAX_DEPTH} entries); narrow it with search"
            ));
        }
        Ok(q)
    }

    /// How many entries of each shard the merged window may need.
    pub fn depth(&self) -> usize {
        self.skip + self.take
    }
}

/// `%XX` and `+` decoded (invalid escapes are kept as they are).
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

fn rid_of(v: &Value) -> Option<RepoId> {
    v.get("rid")?.as_str()?.parse().ok()
}

fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `/api/v1/repos` (and a delegate's repositories) merged: every shard's answer in its order,
/// merged by the listing's order (pinned: `pinned`'s order; else RID or most seeded first),
/// a repository held by two shards (a move in progress) once.
pub fn repos(shards: Vec<Vec<Value>>, q: &ListQuery, pinned: &[RepoId]) -> Vec<Value> {
    let mut all: Vec<(RepoId, Value)> = shards
        .into_iter()
        .flatten()
        .filter_map(|v| rid_of(&v).map(|r| (r, v)))
        .collect();
    if q.pinned {
        let pos = |r: &RepoId| pinned.iter().position(|p| p == r).unwrap_or(usize::MAX);
        all.sort_by_key(|(r, _)| (pos(r), *r.as_bytes()));
    } else {
        match q.sort {
            Sort::Rid => all.sort_by_key(|(r, _)| *r.as_bytes()),
            Sort::Seeding => {
                all.sort_by_key(|(r, v)| (Reverse(count(v, "seeding")), *r.as_bytes()))
            }
        }
    }
    window(dedup(all), q)
}

/// `/api/v1/repos/search` merged: names starting with the query first, then most seeded, then
/// name (as one seed ranks them).
pub fn search(shards: Vec<Vec<Value>>, q: &ListQuery) -> Vec<Value> {
    let needle = q.q.to_lowercase();
    let name = |v: &Value| {
        v.pointer("/payloads/xyz.radicle.project/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_lowercase()
    };
    let mut all: Vec<(RepoId, Value)> = shards
        .into_iter()
        .flatten()
        .filter_map(|v| rid_of(&v).map(|r| (r, v)))
        .collect();
    all.sort_by_cached_key(|(r, v)| {
        let n = name(v);
        (
            !n.starts_with(&needle),
            Reverse(count(v, "seeds")),
            n,
            *r.as_bytes(),
        )
    });
    window(dedup(all), q)
}

/// `/api/v1/node/policies/repos` merged: every shard's entries, by RID, each RID once.
pub fn policies(shards: Vec<Vec<Value>>) -> Vec<Value> {
    let mut all: Vec<(RepoId, Value)> = shards
        .into_iter()
        .flatten()
        .filter_map(|v| rid_of(&v).map(|r| (r, v)))
        .collect();
    all.sort_by_key(|(r, _)| *r.as_bytes());
    dedup(all)
}

/// `/api/v1/stats` summed: `{"repos": {"total": Σ}}`.
pub fn stats(shards: &[Value]) -> Value {
    let total: u64 = shards
        .iter()
        .map(|v| {
            v.pointer("/repos/total")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        })
        .sum();
    serde_json::json!({ "repos": { "total": total } })
}

fn dedup(all: Vec<(RepoId, Value)>) -> Vec<Value> {
    let mut seen = BTreeSet::new();
    all.into_iter()
        .filter(|(r, _)| seen.insert(*r))
        .map(|(_, v)| v)
        .collect()
}

fn window(all: Vec<Value>, q: &ListQuery) -> Vec<Value> {
    all.into_iter().skip(q.skip).take(q.take).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rid(i: u8) -> RepoId {
        let mut b = [0u8; 20];
        b[0] = i;
        RepoId::from_oid_bytes(b)
    }

    fn entry(i: u8, seeding: u64) -> Value {
        json!({ "rid": rid(i).to_string(), "seeding": seeding })
    }

    /// What one seed holding every repository would answer: all entries in the order, windowed.
    fn one_seed(entries: &[(u8, u64)], q: &ListQuery) -> Vec<Value> {
        let mut v: Vec<_> = entries.to_vec();
        match q.sort {
            Sort::Rid => v.sort_by_key(|e| e.0),
            Sort::Seeding => v.sort_by_key(|e| (Reverse(e.1), e.0)),
        }
        v.iter()
            .skip(q.skip)
            .take(q.take)
            .map(|&(i, s)| entry(i, s))
            .collect()
    }

    #[test]
    fn merged_pages_equal_one_seeds_pages() {
        // 60 repositories spread over three shards by a fixed rule; every window of every
        // sort equals the single seed's.
        let entries: Vec<(u8, u64)> = (0..60u8).map(|i| (i * 3 + 1, u64::from(i % 7))).collect();
        for sort in [Sort::Rid, Sort::Seeding] {
            for per_page in [1, 7, 10, 100] {
                for page in 0..8 {
                    let q = ListQuery {
                        pinned: false,
                        sort,
                        skip: page * per_page,
                        take: per_page,
                        q: String::new(),
                    };
                    let shards: Vec<Vec<Value>> = (0..3)
                        .map(|s| {
                            let mine: Vec<_> = entries
                                .iter()
                                .filter(|e| usize::from(e.0) % 3 == s || (e.0 % 5 == 0))
                                .copied()
                                .collect();
                            // Each shard answers its first `depth` entries in the order.
                            let mut all_q = q.clone();
                            all_q.skip = 0;
                            all_q.take = q.depth();
                            one_seed(&mine, &all_q)
                        })
                        .collect();
                    assert_eq!(
                        repos(shards, &q, &[]),
                        one_seed(&entries, &q),
                        "{sort:?} page {page} of {per_page}"
                    );
                }
            }
        }
    }

    #[test]
    fn pinned_keeps_the_configured_order() {
        let pinned = [rid(9), rid(2), rid(5)];
        let q = ListQuery::parse("").unwrap();
        let out = repos(
            vec![vec![entry(2, 1)], vec![entry(5, 1), entry(9, 1)]],
            &q,
            &pinned,
        );
        let rids: Vec<_> = out
            .iter()
            .map(|v| v["rid"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(rids, [rid(9), rid(2), rid(5)].map(|r| r.to_string()));
    }

    #[test]
    fn search_ranks_prefix_then_seeds() {
        let hit = |i: u8, name: &str, seeds: u64| {
            json!({"rid": rid(i).to_string(), "seeds": seeds,
                   "payloads": {"xyz.radicle.project": {"name": name}}})
        };
        let q = ListQuery::parse("q=hel&perPage=10").unwrap();
        let out = search(
            vec![
                vec![hit(1, "hello", 1), hit(2, "shell", 9)],
                vec![hit(3, "Helium", 5), hit(4, "othello", 2)],
            ],
            &q,
        );
        let names: Vec<_> = out
            .iter()
            .map(|v| {
                v.pointer("/payloads/xyz.radicle.project/name")
                    .unwrap()
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(names, ["Helium", "hello", "shell", "othello"]);
    }

    #[test]
    fn stats_sum_and_queries_parse() {
        assert_eq!(
            stats(&[
                json!({"repos": {"total": 3}}),
                json!({"repos": {"total": 4}})
            ]),
            json!({"repos": {"total": 7}})
        );
        let q = ListQuery::parse("show=all&sort=seeding&page=2&perPage=20&q=a%20b+c").unwrap();
        assert_eq!(
            (q.pinned, q.sort, q.skip, q.take),
            (false, Sort::Seeding, 40, 20)
        );
        assert_eq!(q.q, "a b c");
        assert_eq!(ListQuery::parse("perPage=500").unwrap().take, 100);
        assert!(ListQuery::parse("page=10&perPage=100")
            .unwrap_err()
            .contains("deeper"));
        assert!(ListQuery::parse("sort=name").unwrap_err().contains("sort"));
        assert_eq!(decode("%zz%41"), "%zzA");
        assert_eq!(decode("100%"), "100%");
    }

    #[test]
    fn a_repository_on_two_shards_is_listed_once() {
        let q = ListQuery::parse("show=all").unwrap();
        let out = repos(
            vec![vec![entry(1, 1)], vec![entry(1, 1), entry(2, 1)]],
            &q,
            &[],
        );
        assert_eq!(out.len(), 2);
        assert_eq!(
            policies(vec![vec![entry(1, 0)], vec![entry(1, 0)]]).len(),
            1
        );
    }
}
