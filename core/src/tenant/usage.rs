//! Quotas and usage: fetch budgets from byte quotas, repository sizes, egress accounting
//! (persisted periodically), per-tenant request counters and metrics.

use super::*;

impl Tenants {
    /// The most bytes a fetch of `rid` may add before a claimant's byte quota is exceeded
    /// (`None`: no quota applies).
    pub fn fetch_budget(&self, rid: &RepoId) -> Option<u64> {
        let inner = self.read();
        let claims = inner.claims.get(rid)?;
        claims
            .iter()
            .filter_map(|(_, n)| {
                let limit = inner.tenants.get(n)?.quotas.bytes?;
                Some(limit.saturating_sub(inner.stored_bytes(n)))
            })
            .min()
    }

    /// Count a fetch refused or stopped by a byte quota against the claimants that have one.
    pub fn note_byte_quota(&self, rid: &RepoId) {
        let inner = self.read();
        for (_, n) in inner.claims.get(rid).into_iter().flatten() {
            if inner
                .tenants
                .get(n)
                .is_some_and(|t| t.quotas.bytes.is_some())
            {
                self.metrics
                    .tenant
                    .quota_exceeded
                    .with_label_values(&[n.as_str(), "bytes"])
                    .inc();
            }
        }
    }

    /// Record a purge (fetches that started earlier discard their clone).
    pub fn note_purged(&self, rid: RepoId) {
        let now = now_ms();
        let mut inner = self.write();
        inner
            .purged
            .retain(|_, t| now.saturating_sub(*t) < 3_600_000);
        inner.purged.insert(rid, now);
    }

    /// Whether `rid` was purged at or after `since` (ms).
    pub fn purged_since(&self, rid: &RepoId, since: u64) -> bool {
        self.read().purged.get(rid).is_some_and(|t| *t >= since)
    }

    /// The bytes on disk of a repository (`None`: not on disk), as measured: O(its
    /// claimants). Remembered in the index ([`Index::put_repo_size`]), so the next start reads
    /// it instead of walking the directory.
    pub fn set_size(&self, rid: RepoId, bytes: Option<u64>) {
        let mut inner = self.write();
        let old = match bytes {
            Some(b) => inner.sizes.insert(rid, b),
            None => inner.sizes.remove(&rid),
        };
        if old == bytes {
            return;
        }
        let saved = match bytes {
            Some(b) => self.index.put_repo_size(&rid, b),
            None => self.index.delete_repo_size(&rid),
        };
        if let Err(e) = saved {
            tracing::warn!(%rid, error = %crate::logging::chain(&e), "saving the repository size failed; the next start measures it again");
        }
        let (old, new) = (old.unwrap_or(0), bytes.unwrap_or(0));
        let Inner { claims, views, .. } = &mut *inner;
        let mut seen = HashSet::new();
        for (_, name) in claims.get(&rid).into_iter().flatten() {
            if !seen.insert(name) {
                continue;
            }
            if let Some(v) = views.get_mut(name) {
                v.stored_bytes = v.stored_bytes.saturating_sub(old).saturating_add(new);
            }
        }
    }

    /// The remembered size of a repository.
    pub fn size(&self, rid: &RepoId) -> Option<u64> {
        self.read().sizes.get(rid).copied()
    }

    /// Egress: who pays for bytes served of `rid` — the host's tenant if given, else the
    /// repository's owner.
    pub fn payer(&self, host_tenant: Option<&str>, rid: &RepoId) -> Option<String> {
        match host_tenant {
            Some(t) => Some(t.to_owned()),
            None => self.owner(rid).map(|(o, _)| o),
        }
    }

    pub fn add_egress(&self, tenant: &str, transport: &str, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut inner = self.write();
        if !inner.tenants.contains_key(tenant) {
            return;
        }
        let day = today();
        let e = inner.egress.entry(tenant.to_owned()).or_default();
        if e.day != day {
            *e = Egress { day, bytes: 0 };
        }
        e.bytes = e.bytes.saturating_add(bytes);
        drop(inner);
        self.metrics
            .tenant
            .egress_bytes
            .with_label_values(&[tenant, transport])
            .inc_by(bytes);
    }

    /// If the tenant used up today's egress quota: seconds until it resets (UTC midnight).
    pub fn egress_exhausted(&self, tenant: &str) -> Option<u64> {
        let inner = self.read();
        let t = inner.tenants.get(tenant)?;
        let limit = t.quotas.egress_bytes_per_day?;
        if inner.egress_today(tenant) < limit {
            return None;
        }
        drop(inner);
        self.metrics
            .tenant
            .quota_exceeded
            .with_label_values(&[tenant, "egress"])
            .inc();
        let ms = now_ms();
        Some((86_400_000 - ms % 86_400_000).div_ceil(1000))
    }

    /// Persist egress counters (called periodically and at shutdown).
    pub fn flush_egress(&self) {
        let egress: Vec<(String, Egress)> = self
            .read()
            .egress
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        // One synced write for all tenants (not one fsync per tenant every 15 s).
        let records: Vec<(String, Vec<u8>)> = egress
            .into_iter()
            .filter_map(|(name, e)| serde_json::to_vec(&e).ok().map(|b| (name, b)))
            .collect();
        if records.is_empty() {
            return;
        }
        if let Err(err) = self.index.put_tenant_records(Kind::Egress, &records) {
            tracing::warn!(tenants = records.len(), error = %crate::logging::chain(&err), "saving egress counters failed; they are saved again in 15 s");
        }
    }

    pub fn count_request(&self, tenant: &str, status: u16) {
        let class = match status {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.metrics
            .tenant
            .http_requests
            .with_label_values(&[tenant, class])
            .inc();
    }

    pub fn count_rate_limited(&self, tenant: &str) {
        self.metrics
            .tenant
            .rate_limited
            .with_label_values(&[tenant])
            .inc();
    }

    /// Recompute the per-tenant gauges.
    pub fn refresh_metrics(&self) {
        let inner = self.read();
        let m = &self.metrics.tenant;
        let active = inner.tenants.values().filter(|t| t.active()).count();
        m.tenants.with_label_values(&["active"]).set(active as i64);
        m.tenants
            .with_label_values(&["suspended"])
            .set((inner.tenants.len() - active) as i64);
        for t in inner.tenants.values() {
            let u = inner.usage(t);
            let n = t.name.as_str();
            m.init_tenant(n);
            m.repos.with_label_values(&[n]).set(u.repos as i64);
            m.stored_bytes
                .with_label_values(&[n])
                .set(i64::try_from(u.stored_bytes).unwrap_or(i64::MAX));
            for (q, used, limit) in [
                ("repos", u.repos, t.quotas.repos),
                ("bytes", u.stored_bytes, t.quotas.bytes),
                (
                    "egress",
                    u.egress_today_bytes,
                    t.quotas.egress_bytes_per_day,
                ),
            ] {
                match limit {
                    Some(l) if l > 0 => m
                        .quota_usage
                        .with_label_values(&[n, q])
                        .set(used as f64 / l as f64),
                    Some(_) => m.quota_usage.with_label_values(&[n, q]).set(1.0),
                    None => {
                        let _ = m.quota_usage.remove_label_values(&[n, q]);
                    }
                }
            }
        }
    }
}
