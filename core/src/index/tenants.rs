//! Tenant records in RocksDB (CF `tenants`): `t/` ‖ name → tenant JSON, `e/` ‖ name → egress
//! bookkeeping JSON, `i/` ‖ name → seed identity JSON. The index stores bytes; `tenant` owns
//! the types.

use rocksdb::{IteratorMode, ReadOptions};

use super::{Index, IndexError};

pub(crate) const CF_TENANTS: &str = "tenants";

/// A raw key and value.
pub(crate) type KeyValue = (Vec<u8>, Vec<u8>);

/// Which record family a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tenant,
    Egress,
    Identity,
}

impl Kind {
    fn prefix(self) -> &'static [u8] {
        match self {
            Kind::Tenant => b"t/",
            Kind::Egress => b"e/",
            Kind::Identity => b"i/",
        }
    }
}

fn key(kind: Kind, name: &str) -> Vec<u8> {
    [kind.prefix(), name.as_bytes()].concat()
}

impl Index {
    /// Every record of a kind, as (name, JSON bytes), in name order.
    pub fn tenant_records(&self, kind: Kind) -> Result<Vec<(String, Vec<u8>)>, IndexError> {
        let mut opts = ReadOptions::default();
        opts.set_total_order_seek(true);
        let mut out = Vec::new();
        for item in self.db.iterator_cf_opt(
            self.cf(CF_TENANTS)?,
            opts,
            IteratorMode::From(kind.prefix(), rocksdb::Direction::Forward),
        ) {
            let (k, v) = item?;
            let Some(name) = k.strip_prefix(kind.prefix()) else {
                break;
            };
            out.push((String::from_utf8_lossy(name).into_owned(), v.to_vec()));
        }
        Ok(out)
    }

    pub fn put_tenant_record(
        &self,
        kind: Kind,
        name: &str,
        value: &[u8],
    ) -> Result<(), IndexError> {
        self.put(CF_TENANTS, key(kind, name), value)
    }

    /// Several records of a kind in one (synced) write.
    pub fn put_tenant_records(
        &self,
        kind: Kind,
        records: &[(String, Vec<u8>)],
    ) -> Result<(), IndexError> {
        let mut batch = self.batch();
        for (name, value) in records {
            batch.put(CF_TENANTS, key(kind, name), value)?;
        }
        self.commit(batch)
    }

    /// Delete a tenant together with its egress bookkeeping, atomically.
    pub fn delete_tenant_records(&self, name: &str) -> Result<(), IndexError> {
        let mut batch = self.batch();
        batch.delete(CF_TENANTS, key(Kind::Tenant, name))?;
        batch.delete(CF_TENANTS, key(Kind::Egress, name))?;
        self.commit(batch)
    }

    pub fn delete_tenant_record(&self, kind: Kind, name: &str) -> Result<(), IndexError> {
        self.delete(CF_TENANTS, key(kind, name))
    }

    /// Raw `meta` entries (backup).
    pub fn meta_entries(&self) -> Result<Vec<KeyValue>, IndexError> {
        let mut out = Vec::new();
        for item in self
            .db
            .iterator_cf(self.cf(super::CF_META)?, IteratorMode::Start)
        {
            let (k, v) = item?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    pub fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), IndexError> {
        self.put(super::CF_META, key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        index
            .put_tenant_record(Kind::Tenant, "acme", b"{}")
            .unwrap();
        index
            .put_tenant_record(Kind::Tenant, "beta", b"{}")
            .unwrap();
        index.put_tenant_record(Kind::Egress, "acme", b"1").unwrap();
        index
            .put_tenant_record(Kind::Identity, "shard1", b"2")
            .unwrap();
        let t = index.tenant_records(Kind::Tenant).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].0, "acme");
        assert_eq!(index.tenant_records(Kind::Identity).unwrap().len(), 1);
        index.delete_tenant_records("acme").unwrap();
        assert_eq!(index.tenant_records(Kind::Tenant).unwrap().len(), 1);
        assert!(index.tenant_records(Kind::Egress).unwrap().is_empty());
    }
}
