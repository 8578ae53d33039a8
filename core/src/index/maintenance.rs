//! Maintenance bookkeeping in RocksDB (CF `maintenance`): rid (20 bytes) → JSON record (the
//! repository's last measured debt, its last maintenance run and outcome). The index stores
//! bytes; `maintain` owns the type. Rebuildable (measured again from storage), so not synced.

use rocksdb::IteratorMode;

use super::{Index, IndexError};
use seedd_proto::crypto::RepoId;

pub(crate) const CF_MAINTENANCE: &str = "maintenance";

impl Index {
    /// The maintenance record of `rid`, as JSON bytes.
    pub(crate) fn maintenance_record(&self, rid: &RepoId) -> Result<Option<Vec<u8>>, IndexError> {
        Ok(self.db.get_cf(self.cf(CF_MAINTENANCE)?, rid.as_bytes())?)
    }

    pub(crate) fn put_maintenance_record(
        &self,
        rid: &RepoId,
        record: &[u8],
    ) -> Result<(), IndexError> {
        self.put(CF_MAINTENANCE, rid.as_bytes(), record)
    }

    pub(crate) fn delete_maintenance_record(&self, rid: &RepoId) -> Result<(), IndexError> {
        self.delete(CF_MAINTENANCE, rid.as_bytes())
    }

    /// Every maintenance record, in RID order (keys that are not RIDs are skipped).
    #[cfg(test)]
    pub(crate) fn maintenance_records(&self) -> Result<Vec<(RepoId, Vec<u8>)>, IndexError> {
        let mut out = Vec::new();
        self.for_each_maintenance_record(|rid, v| out.push((rid, v.to_vec())))?;
        Ok(out)
    }

    /// Every maintenance record handed to `f` one at a time, in RID order (the scrub's pass:
    /// never all of them in memory at once).
    pub(crate) fn for_each_maintenance_record(
        &self,
        mut f: impl FnMut(RepoId, &[u8]),
    ) -> Result<(), IndexError> {
        for item in self
            .db
            .iterator_cf(self.cf(CF_MAINTENANCE)?, IteratorMode::Start)
        {
            let (k, v) = item?;
            if let Ok(bytes) = <[u8; 20]>::try_from(&*k) {
                f(RepoId::from_oid_bytes(bytes), &v);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_by_rid() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(dir.path()).unwrap();
        let a = RepoId::from_oid_bytes([1; 20]);
        let b = RepoId::from_oid_bytes([2; 20]);
        assert_eq!(index.maintenance_record(&a).unwrap(), None);
        index.put_maintenance_record(&b, b"{\"b\":1}").unwrap();
        index.put_maintenance_record(&a, b"{\"a\":1}").unwrap();
        assert_eq!(
            index.maintenance_record(&a).unwrap().as_deref(),
            Some(&b"{\"a\":1}"[..])
        );
        let all = index.maintenance_records().unwrap();
        assert_eq!(all.iter().map(|(r, _)| *r).collect::<Vec<_>>(), vec![a, b]);
        index.delete_maintenance_record(&a).unwrap();
        assert_eq!(index.maintenance_records().unwrap().len(), 1);
    }
}
