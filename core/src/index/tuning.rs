//! RocksDB options for the index's workload: point lookups of repository records by RID (every
//! HTTP request), per-RID prefix scans of refs, signed refs and routes, and batches of up to
//! thousands of refs per re-indexed repository.
//!
//! * one LRU block cache shared by every column family, with the index and filter blocks
//!   charged to it (pinned, so lookups find them without the cache; counted, instead of
//!   living outside any budget), and the memtables charged to it by a write-buffer manager:
//!   the index's memory is one figure (`index.cache_mib`);
//! * bloom filters: whole-key for the point-lookup column families; prefix (the 20-byte RID)
//!   for `refs`, `sigrefs` and `routing`, which are only read by RID prefix;
//! * LZ4 on every level (zstd for the bottommost would need RocksDB rebuilt with it);
//! * dynamic level sizes, and background flushes/compactions on every core.
//!
//! None of this changes the on-disk format: an index written with [`Tuning::Untuned`] (the
//! options before tuning) opens with [`Tuning::Tuned`] and back; filters, compression and the
//! data-block hash index apply to the SST files written from then on.

use rocksdb::{
    BlockBasedOptions, BlockBasedTablePinningTier, Cache, DBCompressionType, DataBlockIndexType,
    Options, SliceTransform, WriteBufferManager,
};

use super::{gossip, IndexError, CF_REFS, CF_REPOS, CF_SIGREFS};

/// Column families read only by RID prefix (`rid (20) ‖ …` keys).
const PREFIX_CFS: &[&str] = &[CF_REFS, CF_SIGREFS, gossip::CF_ROUTING];
/// Length of the prefix those column families are scanned by: a RID.
const PREFIX_LEN: usize = 20;
/// Bits per key of the bloom filters (≈ 1 % false positives).
const BLOOM_BITS: f64 = 10.0;
/// Default size of the block cache, memtables included (`index.cache_mib`).
pub(crate) const DEFAULT_CACHE_BYTES: usize = 64 << 20;
/// Largest memtable of one column family.
const WRITE_BUFFER_BYTES: usize = 16 << 20;

/// How the index's RocksDB is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// The workload's options (module docs): one cache of `cache_bytes` for blocks, index and
    /// filter blocks and (half of it at most) memtables.
    Tuned { cache_bytes: usize },
    /// RocksDB's defaults plus the prefix extractors and memtable budget the index had before
    /// it was tuned: the baseline of `benches/benches/index.rs`, and the writer of the
    /// compatibility tests' "old" index.
    Untuned,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning::Tuned {
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

/// What [`Tuning::apply`] shares between the database and its column families.
pub(super) struct Shared {
    cache: Option<Cache>,
}

impl Tuning {
    /// Sets the database-wide options on `opts` and returns what the column families share.
    pub(super) fn apply(&self, opts: &mut Options) -> Shared {
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_keep_log_file_num(4);
        match *self {
            Tuning::Untuned => {
                // Memtables of all column families together stay under this (RocksDB's default
                // is 64 MiB per family, two per family: gossip churn alone held ~130 MiB).
                opts.set_db_write_buffer_size(48 << 20);
                Shared { cache: None }
            }
            Tuning::Tuned { cache_bytes } => {
                let cache = Cache::new_lru_cache(cache_bytes);
                // Memtables are charged to the cache and flushed (largest first) beyond half
                // of it, so blocks always keep the other half. No stall: a write never waits
                // for a flush because of this budget.
                let wbm = WriteBufferManager::new_write_buffer_manager_with_cache(
                    cache_bytes / 2,
                    false,
                    cache.clone(),
                );
                opts.set_write_buffer_manager(&wbm);
                let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
                // Flushes and compactions on every core (at least 2 jobs, so a flush never
                // waits behind a long compaction).
                opts.increase_parallelism(i32::try_from(cores.max(2)).unwrap_or(2));
                opts.set_bytes_per_sync(1 << 20);
                Shared { cache: Some(cache) }
            }
        }
    }

    /// The options of column family `name`.
    pub(super) fn cf_options(&self, name: &str, shared: &Shared) -> Options {
        let mut o = Options::default();
        o.set_write_buffer_size(WRITE_BUFFER_BYTES);
        let prefix = PREFIX_CFS.contains(&name);
        if prefix {
            o.set_prefix_extractor(SliceTransform::create_fixed_prefix(PREFIX_LEN));
        }
        let Some(cache) = &shared.cache else {
            return o;
        };
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(cache);
        table.set_cache_index_and_filter_blocks(true);
        table.set_cache_index_and_filter_blocks_with_high_priority(true);
        // Index and filter blocks are charged to the cache but pinned by their table: a
        // lookup does not go through the cache (and its shard lock) to find them.
        table.set_unpartitioned_pinning_tier(BlockBasedTablePinningTier::All);
        table.set_bloom_filter(BLOOM_BITS, false);
        table.set_optimize_filters_for_memory(true);
        if prefix {
            // Only the RID goes into the filter: these families are never read by whole key.
            table.set_whole_key_filtering(false);
            o.set_memtable_prefix_bloom_ratio(0.1);
        } else if name == CF_REPOS {
            // The hottest point lookup (every HTTP request): a hash index in each data block
            // finds the key without a binary search.
            table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
            table.set_data_block_hash_ratio(0.75);
        }
        o.set_block_based_table_factory(&table);
        o.set_compression_type(DBCompressionType::Lz4);
        // zstd would compress the bottom level better but needs RocksDB built with it (a
        // rebuild of librocksdb-sys, and SST files older builds cannot read): LZ4 throughout.
        o.set_bottommost_compression_type(DBCompressionType::Lz4);
        o.set_level_compaction_dynamic_level_bytes(true);
        o
    }
}

/// For `benches/benches/index.rs` (not used by the daemon).
impl super::Index {
    /// The length of `rid`'s stored record, read but not decoded: a point lookup alone.
    #[doc(hidden)]
    pub fn repo_value_len(
        &self,
        rid: &seedd_proto::crypto::RepoId,
    ) -> Result<Option<usize>, IndexError> {
        Ok(self
            .db
            .get_pinned_cf(self.cf(CF_REPOS)?, rid.as_bytes())?
            .map(|v| v.len()))
    }

    /// Flushes every memtable and compacts every column family to its bottommost level.
    #[doc(hidden)]
    pub fn compact_all(&self) -> Result<(), IndexError> {
        for name in super::COLUMN_FAMILIES {
            let cf = self.cf(name)?;
            self.db.flush_cf(cf)?;
            self.db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }

    /// Bytes of SST files across every column family.
    #[doc(hidden)]
    pub fn sst_bytes(&self) -> Result<u64, IndexError> {
        let mut total = 0;
        for name in super::COLUMN_FAMILIES {
            total += self
                .db
                .property_int_value_cf(self.cf(name)?, "rocksdb.total-sst-files-size")?
                .unwrap_or(0);
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use rocksdb::statistics::Ticker;
    use seedd_proto::gossip::Change;

    use super::*;
    use crate::index::policy::{RepoPolicy, Scope};
    use crate::index::{Index, RepoRecord, SigrefsRecord};
    use crate::storage::{RefTarget, Visibility};
    use seedd_proto::crypto::{NodeId, RepoId};

    fn record(rid: RepoId, name: &str) -> RepoRecord {
        RepoRecord {
            rid,
            name: name.into(),
            description: "d".into(),
            default_branch: "main".into(),
            delegates: vec![NodeId::from_bytes([3; 32])],
            threshold: 1,
            visibility: Visibility::Public,
            identity_head: "ab".repeat(20),
            head: Some("cd".repeat(20)),
            fingerprint: "ef".repeat(20),
            ref_count: 0,
            namespaces: vec![NodeId::from_bytes([3; 32])],
            indexed_at: 1,
        }
    }

    fn rid(last: &[u8]) -> RepoId {
        let mut b = [0x10; 20];
        b[20 - last.len()..].copy_from_slice(last);
        RepoId::from_oid_bytes(b)
    }

    /// `n` refs of `rid`, named like a real namespace's, each pointing at an oid made of `tag`.
    fn refs(n: usize, tag: u8) -> Vec<(String, RefTarget)> {
        (0..n)
            .map(|i| {
                (
                    format!("refs/namespaces/z6MkTest{tag}/refs/heads/b{i:04}"),
                    RefTarget::Oid(gix::ObjectId::Sha1([tag; 20])),
                )
            })
            .collect()
    }

    fn sigrefs(nids: &[u8]) -> Vec<SigrefsRecord> {
        nids.iter()
            .map(|n| SigrefsRecord {
                nid: NodeId::from_bytes([*n; 32]),
                commit: Some("aa".repeat(20)),
                level: None,
                error: None,
            })
            .collect()
    }

    fn route(rid: RepoId, n: u8) -> Change {
        Change::Routing {
            rid,
            nid: NodeId::from_bytes([n; 32]),
            timestamp: 7,
        }
    }

    /// Every column family with its data on disk (SST files written with this tuning's
    /// filters and compression), the memtables empty.
    fn flush(index: &Index) {
        for name in super::super::COLUMN_FAMILIES {
            index.db.flush_cf(index.cf(name).unwrap()).unwrap();
        }
    }

    /// An index written with the options from before tuning (SST files without filters, no
    /// compression selected, memtables budgeted by `db_write_buffer_size`) opens with the
    /// tuned options with everything readable, takes writes, and opens untuned again.
    #[test]
    fn an_index_written_before_tuning_opens_tuned_and_back() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (rid(&[1]), rid(&[2]));
        {
            let old = Index::open_tuned(dir.path(), Tuning::Untuned).unwrap();
            old.put_repo(&record(a, "a"), &refs(50, 1), &sigrefs(&[1, 2]))
                .unwrap();
            old.set_repo_policy(&a, Some(RepoPolicy::Allow { scope: Scope::All }))
                .unwrap();
            old.apply_gossip(&[route(a, 1), route(a, 2)]).unwrap();
            old.compact_all().unwrap();
            assert!(old.sst_bytes().unwrap() > 0);
        }
        {
            let tuned = Index::open(dir.path()).unwrap();
            assert_eq!(tuned.repo(&a).unwrap(), Some(record(a, "a")));
            assert_eq!(tuned.refs(&a).unwrap(), refs(50, 1));
            assert_eq!(tuned.sigrefs(&a).unwrap(), sigrefs(&[1, 2]));
            assert_eq!(tuned.seed_count(&a).unwrap(), 2);
            assert_eq!(
                tuned.repo_policy(&a).unwrap(),
                Some(RepoPolicy::Allow { scope: Scope::All })
            );
            assert_eq!(tuned.repo_counts().total, 1);
            // New files in the tuned format next to the old ones, then everything rewritten.
            tuned
                .put_repo(&record(b, "b"), &refs(30, 2), &sigrefs(&[3]))
                .unwrap();
            tuned.apply_gossip(&[route(b, 1)]).unwrap();
            flush(&tuned);
            assert_eq!(tuned.refs(&a).unwrap(), refs(50, 1));
            assert_eq!(tuned.refs(&b).unwrap(), refs(30, 2));
            tuned.compact_all().unwrap();
            assert_eq!(tuned.refs(&a).unwrap(), refs(50, 1));
            assert_eq!(tuned.seed_count(&b).unwrap(), 1);
        }
        let again = Index::open_tuned(dir.path(), Tuning::Untuned).unwrap();
        assert_eq!(again.repo(&b).unwrap(), Some(record(b, "b")));
        assert_eq!(again.refs(&b).unwrap(), refs(30, 2));
        assert_eq!(again.sigrefs(&a).unwrap(), sigrefs(&[1, 2]));
        assert_eq!(again.repo_counts().total, 2);
    }

    /// Prefix blooms and prefix iteration: each RID's refs, signed refs and routes, and only
    /// its, whether they are in the memtable, in freshly flushed files or compacted, for RIDs
    /// whose last bytes are 0xff (their range ends by carrying into the previous byte), the RID
    /// right after such a one, an all-0xff RID, and RIDs that are absent.
    #[test]
    fn prefix_blooms_keep_scans_to_one_rid() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = Options::default();
        opts.enable_statistics();
        let index = Index::open_with(dir.path(), opts.clone(), Tuning::default()).unwrap();
        let ends_ff = rid(&[0xff]);
        let after = rid(&[0x11, 0x00]);
        let before = rid(&[0xfe]);
        let ends_ffff = rid(&[0x20, 0xff, 0xff]);
        let all_ff = RepoId::from_oid_bytes([0xff; 20]);
        let present = [
            (ends_ff, 5, 1u8),
            (after, 3, 2),
            (before, 4, 3),
            (ends_ffff, 2, 4),
            (all_ff, 6, 5),
        ];
        let absent = [rid(&[0xfd]), rid(&[0x21, 0x00, 0x00]), rid(&[0])];
        for (r, n, tag) in present {
            index
                .put_repo(&record(r, "x"), &refs(n, tag), &sigrefs(&[tag]))
                .unwrap();
            index.apply_gossip(&[route(r, tag), route(r, 9)]).unwrap();
        }
        let check = |index: &Index, stage: &str| {
            for (r, n, tag) in present {
                assert_eq!(index.refs(&r).unwrap(), refs(n, tag), "{stage}: {r}");
                assert_eq!(index.sigrefs(&r).unwrap(), sigrefs(&[tag]), "{stage}: {r}");
                assert_eq!(index.seed_count(&r).unwrap(), 2, "{stage}: {r}");
            }
            for r in absent {
                assert!(index.refs(&r).unwrap().is_empty(), "{stage}: {r}");
                assert!(index.sigrefs(&r).unwrap().is_empty(), "{stage}: {r}");
                assert_eq!(index.seed_count(&r).unwrap(), 0, "{stage}: {r}");
                assert!(index.repo(&r).unwrap().is_none(), "{stage}: {r}");
            }
        };
        check(&index, "memtable");
        flush(&index);
        check(&index, "flushed");
        index.compact_all().unwrap();
        check(&index, "compacted");
        let useful = |t| opts.get_ticker_count(t);
        assert!(
            useful(Ticker::LastLevelSeekFiltered) + useful(Ticker::NonLastLevelSeekFiltered) > 0,
            "scans of absent RIDs are answered by the prefix blooms"
        );
        assert!(
            useful(Ticker::BloomFilterUseful) > 0,
            "absent records are answered by the whole-key blooms"
        );

        // Replacing and removing delete the RID's own keys: the neighbours keep theirs.
        index
            .put_repo(&record(ends_ff, "x"), &refs(1, 1), &[])
            .unwrap();
        index.remove_repo(&all_ff).unwrap();
        index.remove_repo(&ends_ffff).unwrap();
        flush(&index);
        for cf in [super::CF_REFS, super::CF_SIGREFS] {
            let props = index
                .db
                .property_value_cf(index.cf(cf).unwrap(), "rocksdb.aggregated-table-properties")
                .unwrap()
                .unwrap_or_default();
            assert!(
                props.contains("# range deletions=0;") && props.contains("# deletions="),
                "{cf}: keys deleted one by one, no range: {props}"
            );
        }
        for stage in ["after writes", "after compaction"] {
            assert_eq!(index.refs(&ends_ff).unwrap(), refs(1, 1), "{stage}");
            assert!(index.sigrefs(&ends_ff).unwrap().is_empty(), "{stage}");
            assert_eq!(index.refs(&after).unwrap(), refs(3, 2), "{stage}");
            assert_eq!(index.refs(&before).unwrap(), refs(4, 3), "{stage}");
            assert!(index.refs(&all_ff).unwrap().is_empty(), "{stage}");
            assert!(index.refs(&ends_ffff).unwrap().is_empty(), "{stage}");
            assert_eq!(index.sigrefs(&after).unwrap(), sigrefs(&[2]), "{stage}");
            index.compact_all().unwrap();
        }
    }

    /// The tuned options are the ones RocksDB runs with (its OPTIONS file), LZ4 included
    /// (RocksDB refuses to open with a compression it was built without).
    #[test]
    fn tuned_options_are_applied() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open_tuned(
            dir.path(),
            Tuning::Tuned {
                cache_bytes: 16 << 20,
            },
        )
        .unwrap();
        drop(index);
        let options = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("OPTIONS-"))
            })
            .max()
            .unwrap();
        let text = std::fs::read_to_string(options).unwrap();
        for want in [
            "bottommost_compression=kLZ4Compression",
            "compression=kLZ4Compression",
            "cache_index_and_filter_blocks=true",
            "whole_key_filtering=false",
            "data_block_index_type=kDataBlockBinaryAndHash",
            "level_compaction_dynamic_level_bytes=true",
            "bloomfilter",
            "block_cache=",
        ] {
            assert!(text.contains(want), "{want} missing from OPTIONS");
        }
        assert_eq!(
            Tuning::default(),
            Tuning::Tuned {
                cache_bytes: crate::config::IndexConfig::default().cache_bytes()
            }
        );
    }
}
