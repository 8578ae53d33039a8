//! The service's upkeep: the timer tick (keep-alive pings, stale sessions, the inventory
//! relay), the caps on state other nodes make us hold (eviction of whole nodes), and pruning of
//! old gossip and routes.

use super::*;

impl Service {
    /// Timer input; call about once a second. Pings quiet sessions, drops stale ones, relays
    /// queued inventories and prunes old gossip and routes.
    pub fn tick(&mut self, now: u64) {
        let timers = self.config.timers.clone();
        let mut stale = Vec::new();
        let mut ping = Vec::new();
        for s in self.sessions.values_mut() {
            if now.saturating_sub(s.last_received) >= timers.stale_ms {
                stale.push(s.id);
            } else if now.saturating_sub(s.last_sent) >= timers.keep_alive_ms {
                // Small pongs: we only need liveness, not 64 KiB of zeroes.
                let ponglen = (now % 16) as u16;
                s.ping = Some((now, ponglen));
                ping.push((s.id, ponglen));
            }
        }
        for id in stale {
            self.disconnect_for(id, DisconnectReason::Stale);
        }
        for (id, ponglen) in ping {
            self.send(vec![id], Message::Ping(Ping { ponglen, zeroes: 0 }), now);
        }
        if self.inventory_pending
            && self
                .inventory_sent
                .is_none_or(|t| now.saturating_sub(t) >= timers.inventory_interval_ms)
        {
            self.announce_inventory(now);
        }
        if now.saturating_sub(self.last_relay) >= timers.relay_interval_ms {
            self.last_relay = now;
            for (ann, skip) in std::mem::take(&mut self.relay_queue) {
                self.relay(ann, skip, now);
            }
        }
        if now.saturating_sub(self.last_prune) >= timers.prune_interval_ms {
            self.last_prune = now;
            self.prune(now);
        }
    }

    fn over_caps(&self, slack: usize) -> bool {
        let caps = &self.config.caps;
        let within = |len: usize, cap: usize| len <= cap.saturating_sub(cap / 10 * slack);
        !(within(self.nodes.len(), caps.max_nodes)
            && within(self.routing.len(), caps.max_routes)
            && within(self.store.len(), caps.max_announcements))
    }

    /// Above any cap, forgets whole nodes (address-book entry, routes, announcements, each
    /// emitted as a `Change`) until every table is back under 90% of its cap, so the scan is
    /// amortised over many insertions. Never ourselves. Nodes that are not connected go first:
    /// those that announced none of the repositories we seed before the others, each group
    /// oldest `last_seen` (latest node announcement or announcement received) first. Connected
    /// peers go last, the one holding the most state first (a connected peer flooding refs
    /// announcements for ever new repositories is the only way to get there).
    pub fn enforce_caps(&mut self) {
        if !self.over_caps(0) {
            return;
        }
        let connected: HashSet<NodeId> = self.sessions.values().map(|s| s.nid).collect();
        let mut seen: HashMap<NodeId, (u64, Vec<AnnouncementKey>)> = HashMap::new();
        for r in self.nodes.values() {
            let e = seen.entry(r.nid).or_default();
            e.0 = e.0.max(r.last_seen);
        }
        for stored in self.store.iter() {
            let e = seen.entry(stored.announcement.node).or_default();
            e.0 = e.0.max(stored.received_at);
            e.1.push(stored.key());
        }
        for nid in self.routing.nodes() {
            seen.entry(nid).or_default();
        }
        // (connected, seeds one of ours, rank: last_seen, or for connected peers fewest
        // entries last), node, its announcement keys.
        type Victim = ((bool, bool, u64), NodeId, Vec<AnnouncementKey>);
        let mut victims: Vec<Victim> = seen
            .into_iter()
            .filter(|(nid, _)| *nid != self.nid)
            .map(|(nid, (last_seen, keys))| {
                let repos = self.routing.repos_of(&nid);
                let ours = repos.iter().any(|rid| self.seeds_repo(rid));
                let rank = if connected.contains(&nid) {
                    u64::MAX - (repos.len() + keys.len()) as u64
                } else {
                    last_seen
                };
                ((connected.contains(&nid), ours, rank), nid, keys)
            })
            .collect();
        victims.sort_unstable_by_key(|(order, nid, _)| (*order, *nid));
        for (_, nid, keys) in victims {
            if !self.over_caps(1) {
                break;
            }
            if self.nodes.remove(&nid).is_some() {
                self.outputs.push(Output::Persist(Change::NodeRemoved(nid)));
            }
            for rid in self.routing.repos_of(&nid) {
                self.remove_route(rid, nid);
            }
            for key in keys {
                self.store.remove(&key);
                self.outputs
                    .push(Output::Persist(Change::AnnouncementRemoved(key)));
            }
        }
    }

    /// Drops gossip older than the max age and, above the size limit, old routes.
    pub fn prune(&mut self, now: u64) {
        let timers = self.config.timers.clone();
        let cutoff = now.saturating_sub(timers.gossip_max_age_ms);
        for key in self.store.older_than(cutoff) {
            if key.node == self.nid {
                continue;
            }
            self.store.remove(&key);
            self.outputs
                .push(Output::Persist(Change::AnnouncementRemoved(key)));
        }
        if self.routing.len() > timers.routing_max_size {
            let cutoff = now.saturating_sub(timers.routing_max_age_ms);
            let own = self.nid;
            for (rid, nid) in self.routing.older_than(cutoff) {
                if nid != own {
                    self.remove_route(rid, nid);
                }
            }
        }
    }
}
