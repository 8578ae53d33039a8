//! The encoding of the values on the index's hot paths: CF `repos` ([`RepoRecord`], read by
//! every HTTP request, web request and Radicle stream, by the census at open and by pages) and
//! CF `sigrefs` ([`SigrefsRecord`], read per repository by the web API, the admin API and the
//! re-index).
//!
//! A value starts with a format byte:
//!
//! * [`BINARY_V1`] (`0x01`): the record in [postcard](https://postcard.jamesmunns.com/wire-format)
//!   through the mirror types below — ids as their raw bytes (not base58 text), integers as
//!   varints, strings length-prefixed, `Option` and enums as one tag byte — then nothing more.
//!   Every write is binary.
//! * `{` (`0x7b`): JSON, as seedd wrote before binary values; read as before, so an index written
//!   by an older seedd opens and is rewritten record by record as repositories are re-indexed.
//! * anything else (an empty value, a format byte of a newer seedd): [`IndexError::Corrupt`].
//!
//! The mirror types *are* the format: they are not the records' serde derives (whose attributes —
//! `tag = "type"`, `skip_serializing_if`, ids as strings — suit JSON, not a format without field
//! names), so a change to [`RepoRecord`] cannot change the bytes by accident. A new layout takes a
//! new format byte, and the old one stays readable.

use serde::{Deserialize, Serialize};

use super::{IndexError, RepoRecord, SigrefsRecord, CF_REPOS, CF_SIGREFS};
use crate::storage::{FeatureLevel, Visibility};
use seedd_proto::crypto::{NodeId, RepoId};

/// First byte of a binary (postcard) value. JSON values never start with it.
pub(crate) const BINARY_V1: u8 = 0x01;

/// How values are written. Reads accept both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ValueEncoding {
    /// [`BINARY_V1`]: what seedd writes.
    #[default]
    Binary,
    /// JSON, as seedd wrote before binary values: for the compatibility tests and the index
    /// bench's baseline only.
    Json,
}

/// A record stored in a column family in this encoding.
pub(crate) trait Value: Sized {
    /// The column family the record lives in (for errors).
    const CF: &'static str;

    /// The value in [`BINARY_V1`], without the format byte.
    fn to_binary(&self) -> Result<Vec<u8>, postcard::Error>;

    /// The record from a [`BINARY_V1`] value without its format byte.
    fn from_binary(bytes: &[u8]) -> Result<Self, String>;

    /// Whether `key` is this record's key (a value read under another key is corrupt).
    fn belongs_to(&self, key: &[u8]) -> bool;
}

/// `record`, stored under `key`, as a value in `encoding`.
pub(crate) fn encode<T: Value + Serialize>(
    key: &[u8],
    record: &T,
    encoding: ValueEncoding,
) -> Result<Vec<u8>, IndexError> {
    let failed = |reason: String| corrupt::<T>(key, format!("encoding: {reason}"));
    match encoding {
        ValueEncoding::Binary => {
            let body = record
                .to_binary()
                .map_err(|e| failed(crate::logging::chain(&e).to_string()))?;
            let mut out = Vec::with_capacity(body.len() + 1);
            out.push(BINARY_V1);
            out.extend_from_slice(&body);
            Ok(out)
        }
        ValueEncoding::Json => {
            serde_json::to_vec(record).map_err(|e| failed(crate::logging::chain(&e).to_string()))
        }
    }
}

/// The record stored under `key`: binary or JSON by its first byte, and its own id the one
/// in `key`. Anything else is [`IndexError::Corrupt`] naming the column family and the key.
pub(crate) fn decode<T: Value + for<'de> Deserialize<'de>>(
    key: &[u8],
    value: &[u8],
) -> Result<T, IndexError> {
    let record = match value.first() {
        Some(&BINARY_V1) => T::from_binary(&value[1..]).map_err(|e| corrupt::<T>(key, e))?,
        Some(b'{') => {
            serde_json::from_slice(value).map_err(|e| corrupt::<T>(key, format!("JSON: {e}")))?
        }
        Some(b) => {
            return Err(corrupt::<T>(
                key,
                format!("unknown value format byte {b:#04x} (written by a newer seedd?)"),
            ))
        }
        None => return Err(corrupt::<T>(key, "empty value".into())),
    };
    if !record.belongs_to(key) {
        return Err(corrupt::<T>(
            key,
            "the value is another key's record".into(),
        ));
    }
    Ok(record)
}

fn corrupt<T: Value>(key: &[u8], reason: String) -> IndexError {
    IndexError::Corrupt {
        cf: T::CF,
        key: Some(key_text(T::CF, key)),
        reason,
    }
}

/// A key of `repos` (`rad:z…`) or `sigrefs` (`rad:z…/z6Mk…`) as text; hex when it has not
/// the length of one.
pub(crate) fn key_text(cf: &str, key: &[u8]) -> String {
    let rid = |k: &[u8]| <[u8; 20]>::try_from(k).ok().map(RepoId::from_oid_bytes);
    let nid = |k: &[u8]| <[u8; 32]>::try_from(k).ok().map(NodeId::from_bytes);
    match cf {
        CF_REPOS => rid(key).map(|r| r.to_string()),
        CF_SIGREFS if key.len() == 52 => rid(&key[..20])
            .zip(nid(&key[20..]))
            .map(|(r, n)| format!("{r}/{n}")),
        _ => None,
    }
    .unwrap_or_else(|| format!("0x{}", hex::encode(key)))
}

/// [`BINARY_V1`] body of a [`RepoRecord`]. Field order is the format.
#[derive(Serialize, Deserialize)]
struct RepoV1<'a> {
    rid: [u8; 20],
    name: &'a str,
    description: &'a str,
    default_branch: &'a str,
    delegates: Vec<[u8; 32]>,
    threshold: u64,
    visibility: VisibilityV1,
    identity_head: &'a str,
    #[serde(borrow)]
    head: Option<&'a str>,
    fingerprint: &'a str,
    ref_count: u64,
    namespaces: Vec<[u8; 32]>,
    indexed_at: u64,
}

/// [`Visibility`]: tag 0 public, 1 private with its allow list.
#[derive(Serialize, Deserialize)]
enum VisibilityV1 {
    Public,
    Private(Vec<[u8; 32]>),
}

/// [`BINARY_V1`] body of a [`SigrefsRecord`].
#[derive(Serialize, Deserialize)]
struct SigrefsV1<'a> {
    nid: [u8; 32],
    #[serde(borrow)]
    commit: Option<&'a str>,
    level: Option<LevelV1>,
    #[serde(borrow)]
    error: Option<&'a str>,
}

/// [`FeatureLevel`]: tags 0, 1, 2.
#[derive(Serialize, Deserialize)]
enum LevelV1 {
    None,
    Root,
    Parent,
}

fn id_bytes(ids: &[NodeId]) -> Vec<[u8; 32]> {
    ids.iter().map(|n| *n.as_bytes()).collect()
}

fn node_ids(bytes: Vec<[u8; 32]>) -> Vec<NodeId> {
    bytes.into_iter().map(NodeId::from_bytes).collect()
}

/// `bytes` as exactly one `T`: trailing bytes are corruption too.
fn from_postcard<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    match postcard::take_from_bytes(bytes) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(format!("{} trailing bytes", rest.len())),
        Err(e) => Err(format!("binary value: {e}")),
    }
}

fn usize_of(n: u64, what: &str) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("{what} {n} does not fit this machine's usize"))
}

impl Value for RepoRecord {
    const CF: &'static str = CF_REPOS;

    fn to_binary(&self) -> Result<Vec<u8>, postcard::Error> {
        postcard::to_allocvec(&RepoV1 {
            rid: *self.rid.as_bytes(),
            name: &self.name,
            description: &self.description,
            default_branch: &self.default_branch,
            delegates: id_bytes(&self.delegates),
            threshold: self.threshold as u64,
            visibility: match &self.visibility {
                Visibility::Public => VisibilityV1::Public,
                Visibility::Private { allow } => VisibilityV1::Private(id_bytes(allow)),
            },
            identity_head: &self.identity_head,
            head: self.head.as_deref(),
            fingerprint: &self.fingerprint,
            ref_count: self.ref_count as u64,
            namespaces: id_bytes(&self.namespaces),
            indexed_at: self.indexed_at,
        })
    }

    fn from_binary(bytes: &[u8]) -> Result<Self, String> {
        let v: RepoV1<'_> = from_postcard(bytes)?;
        Ok(RepoRecord {
            rid: RepoId::from_oid_bytes(v.rid),
            name: v.name.to_owned(),
            description: v.description.to_owned(),
            default_branch: v.default_branch.to_owned(),
            delegates: node_ids(v.delegates),
            threshold: usize_of(v.threshold, "threshold")?,
            visibility: match v.visibility {
                VisibilityV1::Public => Visibility::Public,
                VisibilityV1::Private(allow) => Visibility::Private {
                    allow: node_ids(allow),
                },
            },
            identity_head: v.identity_head.to_owned(),
            head: v.head.map(str::to_owned),
            fingerprint: v.fingerprint.to_owned(),
            ref_count: usize_of(v.ref_count, "ref count")?,
            namespaces: node_ids(v.namespaces),
            indexed_at: v.indexed_at,
        })
    }

    fn belongs_to(&self, key: &[u8]) -> bool {
        key == self.rid.as_bytes()
    }
}

impl Value for SigrefsRecord {
    const CF: &'static str = CF_SIGREFS;

    fn to_binary(&self) -> Result<Vec<u8>, postcard::Error> {
        postcard::to_allocvec(&SigrefsV1 {
            nid: *self.nid.as_bytes(),
            commit: self.commit.as_deref(),
            level: self.level.map(|l| match l {
                FeatureLevel::None => LevelV1::None,
                FeatureLevel::Root => LevelV1::Root,
                FeatureLevel::Parent => LevelV1::Parent,
            }),
            error: self.error.as_deref(),
        })
    }

    fn from_binary(bytes: &[u8]) -> Result<Self, String> {
        let v: SigrefsV1<'_> = from_postcard(bytes)?;
        Ok(SigrefsRecord {
            nid: NodeId::from_bytes(v.nid),
            commit: v.commit.map(str::to_owned),
            level: v.level.map(|l| match l {
                LevelV1::None => FeatureLevel::None,
                LevelV1::Root => FeatureLevel::Root,
                LevelV1::Parent => FeatureLevel::Parent,
            }),
            error: v.error.map(str::to_owned),
        })
    }

    /// Keys are `rid (20) ‖ nid (32)`.
    fn belongs_to(&self, key: &[u8]) -> bool {
        key.len() == 52 && &key[20..] == self.nid.as_bytes()
    }
}

/// For tests and `benches/benches/index.rs`.
impl super::Index {
    /// This handle writes records in `encoding` from now on ([`ValueEncoding::Json`]: the
    /// encoding of older seedd, for compatibility tests and the bench's baseline).
    #[doc(hidden)]
    pub fn with_value_encoding(mut self, encoding: ValueEncoding) -> Self {
        self.values = encoding;
        self
    }
}

/// For `benches/benches/index.rs`: `record`'s value in CF `repos`, in `encoding`.
#[doc(hidden)]
pub fn repo_value(record: &RepoRecord, encoding: ValueEncoding) -> Result<Vec<u8>, IndexError> {
    encode(record.rid.as_bytes(), record, encoding)
}

/// For `benches/benches/index.rs`: the record of a value of CF `repos` (either encoding).
#[doc(hidden)]
pub fn repo_from_value(rid: &RepoId, value: &[u8]) -> Result<RepoRecord, IndexError> {
    decode(rid.as_bytes(), value)
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;

    fn nids() -> impl Strategy<Value = Vec<NodeId>> {
        vec(any::<[u8; 32]>().prop_map(NodeId::from_bytes), 0..4)
    }

    fn visibility() -> impl Strategy<Value = Visibility> {
        prop_oneof![
            Just(Visibility::Public),
            nids().prop_map(|allow| Visibility::Private { allow }),
        ]
    }

    prop_compose! {
        fn repo_record()(
            rid in any::<[u8; 20]>(),
            name in ".*",
            description in ".*",
            default_branch in ".*",
            delegates in nids(),
            threshold in any::<usize>(),
            visibility in visibility(),
            identity_head in "[0-9a-f]{0,40}",
            head in proptest::option::of("[0-9a-f]{40}"),
            fingerprint in ".*",
            ref_count in any::<usize>(),
            namespaces in nids(),
            indexed_at in any::<u64>(),
        ) -> RepoRecord {
            RepoRecord {
                rid: RepoId::from_oid_bytes(rid),
                name, description, default_branch, delegates, threshold, visibility,
                identity_head, head, fingerprint, ref_count, namespaces, indexed_at,
            }
        }
    }

    fn level() -> impl Strategy<Value = Option<FeatureLevel>> {
        proptest::option::of(prop_oneof![
            Just(FeatureLevel::None),
            Just(FeatureLevel::Root),
            Just(FeatureLevel::Parent),
        ])
    }

    prop_compose! {
        fn sigrefs_record()(
            nid in any::<[u8; 32]>(),
            commit in proptest::option::of("[0-9a-f]{40}"),
            level in level(),
            error in proptest::option::of(".*"),
        ) -> SigrefsRecord {
            SigrefsRecord { nid: NodeId::from_bytes(nid), commit, level, error }
        }
    }

    fn sigrefs_key(rid: [u8; 20], s: &SigrefsRecord) -> Vec<u8> {
        [&rid[..], &s.nid.as_bytes()[..]].concat()
    }

    /// The value is corrupt, in `cf`, at the key given as text.
    fn assert_corrupt(r: Result<impl std::fmt::Debug, IndexError>, want_cf: &str, want_key: &str) {
        match r {
            Err(IndexError::Corrupt { cf, key, reason }) => {
                assert_eq!(cf, want_cf, "{reason}");
                assert_eq!(key.as_deref(), Some(want_key), "{reason}");
            }
            other => panic!("expected Corrupt in {want_cf}, got {other:?}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Both encodings give back the record; binary values start with the format byte,
        /// JSON ones with `{`, and the binary one is the smaller.
        #[test]
        fn repo_records_round_trip(r in repo_record()) {
            let key = r.rid.as_bytes().to_vec();
            let bin = encode(&key, &r, ValueEncoding::Binary).unwrap();
            let json = encode(&key, &r, ValueEncoding::Json).unwrap();
            prop_assert_eq!(bin[0], BINARY_V1);
            prop_assert_eq!(json[0], b'{');
            prop_assert!(bin.len() < json.len());
            prop_assert_eq!(&decode::<RepoRecord>(&key, &bin).unwrap(), &r);
            prop_assert_eq!(&decode::<RepoRecord>(&key, &json).unwrap(), &r);
        }

        #[test]
        fn sigrefs_records_round_trip(rid in any::<[u8; 20]>(), s in sigrefs_record()) {
            let key = sigrefs_key(rid, &s);
            let bin = encode(&key, &s, ValueEncoding::Binary).unwrap();
            let json = encode(&key, &s, ValueEncoding::Json).unwrap();
            prop_assert_eq!(bin[0], BINARY_V1);
            prop_assert_eq!(json[0], b'{');
            prop_assert_eq!(&decode::<SigrefsRecord>(&key, &bin).unwrap(), &s);
            prop_assert_eq!(&decode::<SigrefsRecord>(&key, &json).unwrap(), &s);
        }

        /// Every strict prefix of a binary value, and any bytes after the format byte, decode to
        /// a record or to `Corrupt` with the column family and key: never a panic.
        #[test]
        fn damaged_binary_values_are_corrupt_not_panics(
            r in repo_record(),
            s in sigrefs_record(),
            junk in vec(any::<u8>(), 0..200),
        ) {
            let key = r.rid.as_bytes().to_vec();
            let text = r.rid.to_string();
            let bin = encode(&key, &r, ValueEncoding::Binary).unwrap();
            for end in 0..bin.len() {
                assert_corrupt(decode::<RepoRecord>(&key, &bin[..end]), CF_REPOS, &text);
            }
            let skey = sigrefs_key(*r.rid.as_bytes(), &s);
            let stext = format!("{}/{}", r.rid, s.nid);
            let sbin = encode(&skey, &s, ValueEncoding::Binary).unwrap();
            for end in 0..sbin.len() {
                assert_corrupt(decode::<SigrefsRecord>(&skey, &sbin[..end]), CF_SIGREFS, &stext);
            }
            let mut value = vec![BINARY_V1];
            value.extend_from_slice(&junk);
            match decode::<RepoRecord>(&key, &value) {
                Ok(got) => prop_assert_eq!(got.rid, r.rid),
                Err(e) => assert_corrupt(Err::<(), _>(e), CF_REPOS, &text),
            }
            match decode::<SigrefsRecord>(&skey, &value) {
                Ok(got) => prop_assert_eq!(got.nid, s.nid),
                Err(e) => assert_corrupt(Err::<(), _>(e), CF_SIGREFS, &stext),
            }
        }
    }

    fn sample() -> RepoRecord {
        RepoRecord {
            rid: RepoId::from_oid_bytes([0xaa; 20]),
            name: "ab".into(),
            description: String::new(),
            default_branch: "m".into(),
            delegates: vec![NodeId::from_bytes([0xbb; 32])],
            threshold: 1,
            visibility: Visibility::Private {
                allow: vec![NodeId::from_bytes([0xcc; 32])],
            },
            identity_head: "i".into(),
            head: None,
            fingerprint: "f".into(),
            ref_count: 300,
            namespaces: vec![],
            indexed_at: 2,
        }
    }

    /// The bytes of [`BINARY_V1`] are fixed: a change to the mirror types (field order, a tag)
    /// fails here instead of making every stored record unreadable.
    #[test]
    fn the_binary_format_is_pinned() {
        let r = sample();
        let mut want = vec![BINARY_V1];
        want.extend([0xaa; 20]); // rid
        want.extend([2, b'a', b'b']); // name
        want.push(0); // description
        want.extend([1, b'm']); // default branch
        want.push(1); // one delegate
        want.extend([0xbb; 32]);
        want.push(1); // threshold
        want.extend([1, 1]); // private, one allowed node
        want.extend([0xcc; 32]);
        want.extend([1, b'i']); // identity head
        want.push(0); // no head
        want.extend([1, b'f']); // fingerprint
        want.extend([0xac, 0x02]); // ref count 300, varint
        want.push(0); // no namespaces
        want.push(2); // indexed at
        assert_eq!(repo_value(&r, ValueEncoding::Binary).unwrap(), want);

        let s = SigrefsRecord {
            nid: NodeId::from_bytes([0xdd; 32]),
            commit: Some("c".into()),
            level: Some(FeatureLevel::Parent),
            error: None,
        };
        let key = sigrefs_key([0xaa; 20], &s);
        let mut want = vec![BINARY_V1];
        want.extend([0xdd; 32]);
        want.extend([1, 1, b'c']); // some commit
        want.extend([1, 2]); // some level, parent
        want.push(0); // no error
        assert_eq!(encode(&key, &s, ValueEncoding::Binary).unwrap(), want);
    }

    /// Values that are not a record of their key: `Corrupt` naming the column family and the
    /// key, whatever the damage.
    #[test]
    fn corrupt_values_name_their_column_family_and_key() {
        let r = sample();
        let key = r.rid.as_bytes().to_vec();
        let text = r.rid.to_string();
        let bin = repo_value(&r, ValueEncoding::Binary).unwrap();
        let mut trailing = bin.clone();
        trailing.push(0);
        let mut newer = bin.clone();
        newer[0] = 0x02;
        let other = RepoId::from_oid_bytes([0x11; 20]);
        for (what, value) in [
            ("empty", vec![]),
            ("format byte of a newer seedd", newer),
            ("trailing byte", trailing),
            ("truncated", bin[..bin.len() - 1].to_vec()),
            ("bad JSON", b"{\"rid\":".to_vec()),
            ("text", b"not a record".to_vec()),
        ] {
            let err = decode::<RepoRecord>(&key, &value).unwrap_err();
            assert!(err.to_string().contains(&text), "{what}: {err}");
            assert_corrupt(Err::<(), _>(err), CF_REPOS, &text);
        }
        // Under another key (binary or JSON): not that key's record.
        let json = repo_value(&r, ValueEncoding::Json).unwrap();
        for value in [&bin, &json] {
            assert_corrupt(repo_from_value(&other, value), CF_REPOS, &other.to_string());
        }
        // Invalid UTF-8 in a string.
        let mut bad_utf8 = bin.clone();
        bad_utf8[22] = 0xff; // first byte of the name
        assert_corrupt(decode::<RepoRecord>(&key, &bad_utf8), CF_REPOS, &text);
        // A signed refs value under a key of another length: named in hex.
        let s = SigrefsRecord {
            nid: NodeId::from_bytes([0xdd; 32]),
            commit: None,
            level: None,
            error: Some("e".into()),
        };
        let skey = sigrefs_key([0xaa; 20], &s);
        let sbin = encode(&skey, &s, ValueEncoding::Binary).unwrap();
        assert_corrupt(
            decode::<SigrefsRecord>(&skey[..51], &sbin),
            CF_SIGREFS,
            &format!("0x{}", hex::encode(&skey[..51])),
        );
        assert_eq!(decode::<SigrefsRecord>(&skey, &sbin).unwrap(), s);
    }

    fn raw(index: &super::super::Index, cf: &'static str, key: &[u8]) -> Vec<u8> {
        index
            .db
            .get_cf(index.cf(cf).unwrap(), key)
            .unwrap()
            .unwrap()
    }

    fn record(rid: u8, name: &str) -> RepoRecord {
        RepoRecord {
            rid: RepoId::from_oid_bytes([rid; 20]),
            name: name.into(),
            delegates: vec![NodeId::from_bytes([rid; 32])],
            namespaces: vec![NodeId::from_bytes([rid; 32])],
            visibility: Visibility::Public,
            ..sample()
        }
    }

    fn verified(nid: u8, commit: &str) -> SigrefsRecord {
        SigrefsRecord {
            nid: NodeId::from_bytes([nid; 32]),
            commit: Some(commit.into()),
            level: Some(FeatureLevel::Root),
            error: None,
        }
    }

    /// An index whose records were written as JSON (by the encoding path of older seedd) opens
    /// — the census reads them — and reads them through every accessor; a record written again
    /// is binary, next to JSON ones, and both survive a reopen.
    #[test]
    fn an_index_with_json_values_opens_reads_and_rewrites_binary() {
        use crate::index::{Index, RepoDelta};

        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (record(1, "a"), record(2, "b"));
        let key = |r: &RepoRecord, s: &SigrefsRecord| sigrefs_key(*r.rid.as_bytes(), s);
        {
            let old = Index::open(dir.path())
                .unwrap()
                .with_value_encoding(ValueEncoding::Json);
            old.put_repo(&a, &[], &[verified(1, "c1"), verified(3, "c3")])
                .unwrap();
            old.put_repo(&b, &[], &[verified(2, "c2")]).unwrap();
            old.compact_all().unwrap();
            assert_eq!(raw(&old, CF_REPOS, a.rid.as_bytes())[0], b'{');
            assert_eq!(raw(&old, CF_SIGREFS, &key(&a, &verified(1, "")))[0], b'{');
        }
        {
            let index = Index::open(dir.path()).unwrap();
            assert_eq!(index.repo_counts().total, 2);
            assert_eq!(index.repo_name(&b.rid).as_deref(), Some("b"));
            assert_eq!(index.repo(&a.rid).unwrap(), Some(a.clone()));
            assert_eq!(index.repos().unwrap(), [a.clone(), b.clone()]);
            assert_eq!(
                index.repos_page(None, 10).unwrap().items,
                [a.clone(), b.clone()]
            );
            assert_eq!(
                index.sigrefs(&a.rid).unwrap(),
                [verified(1, "c1"), verified(3, "c3")]
            );

            // `a` re-indexed: its record and the namespace re-verified are binary now; the
            // other namespace and `b` stay JSON until they change.
            let renamed = RepoRecord {
                name: "a2".into(),
                ..a.clone()
            };
            index
                .update_repo(&RepoDelta {
                    record: &renamed,
                    refs: &[],
                    peels: &Default::default(),
                    gone: &[],
                    sigrefs: &[verified(1, "c1'")],
                    gone_namespaces: &[],
                })
                .unwrap();
            assert_eq!(raw(&index, CF_REPOS, a.rid.as_bytes())[0], BINARY_V1);
            assert_eq!(
                raw(&index, CF_SIGREFS, &key(&a, &verified(1, "")))[0],
                BINARY_V1
            );
            assert_eq!(raw(&index, CF_SIGREFS, &key(&a, &verified(3, "")))[0], b'{');
            assert_eq!(raw(&index, CF_REPOS, b.rid.as_bytes())[0], b'{');
            assert_eq!(
                index.sigrefs(&a.rid).unwrap(),
                [verified(1, "c1'"), verified(3, "c3")]
            );
            assert_eq!(
                index.repos_page(None, 10).unwrap().items,
                [renamed.clone(), b.clone()]
            );
            index.put_repo(&b, &[], &[verified(2, "c2")]).unwrap();
            assert_eq!(raw(&index, CF_REPOS, b.rid.as_bytes())[0], BINARY_V1);
            index.compact_all().unwrap();
        }
        let index = Index::open(dir.path()).unwrap();
        assert_eq!(index.repos_named("a2").len(), 1);
        assert_eq!(
            index.repo(&a.rid).unwrap().map(|r| r.name),
            Some("a2".into())
        );
        assert_eq!(index.repo(&b.rid).unwrap(), Some(b.clone()));
        assert_eq!(index.sigrefs(&b.rid).unwrap(), [verified(2, "c2")]);
    }

    /// A damaged value on disk is `Corrupt` with the column family and key from every reader
    /// (the census at open included), not a panic.
    #[test]
    fn a_corrupt_value_on_disk_is_an_error_naming_it() {
        use crate::index::Index;

        let dir = tempfile::tempdir().unwrap();
        let a = record(1, "a");
        let s = verified(1, "c");
        let text = a.rid.to_string();
        {
            let index = Index::open(dir.path()).unwrap();
            index.put_repo(&a, &[], std::slice::from_ref(&s)).unwrap();
            let mut value = raw(&index, CF_REPOS, a.rid.as_bytes());
            value.truncate(value.len() / 2);
            index.put(CF_REPOS, a.rid.as_bytes(), &value).unwrap();
            let skey = sigrefs_key(*a.rid.as_bytes(), &s);
            index.put(CF_SIGREFS, &skey, [BINARY_V1, 7]).unwrap();
            assert_corrupt(index.repo(&a.rid), CF_REPOS, &text);
            assert_corrupt(index.repos(), CF_REPOS, &text);
            assert_corrupt(index.repos_page(None, 10), CF_REPOS, &text);
            assert_corrupt(index.repos_of_page(&[a.rid], None, 10), CF_REPOS, &text);
            assert_corrupt(
                index.sigrefs(&a.rid),
                CF_SIGREFS,
                &format!("{text}/{}", s.nid),
            );
        }
        assert_corrupt(Index::open(dir.path()).map(|_| ()), CF_REPOS, &text);
    }
}
