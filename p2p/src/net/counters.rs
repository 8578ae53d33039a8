//! Counter handles of the gossip paths, resolved once. A `with_label_values` hashes its
//! labels and takes the family's lock; the gossip paths count per message received and per
//! recipient of each relay, under the core lock, so they use these handles instead.

use prometheus::IntCounter;
use seedd_core::metrics::P2pMetrics;
use seedd_proto::gossip::Dropped;
use seedd_proto::wire::MessageType;

use super::type_label;

/// `messages` and `message_bytes` of one direction and message type.
#[derive(Clone)]
pub(crate) struct Traffic {
    pub messages: IntCounter,
    pub bytes: IntCounter,
}

impl Traffic {
    /// Counts `n` messages of `bytes` bytes in all.
    pub(crate) fn count(&self, n: u64, bytes: u64) {
        self.messages.inc_by(n);
        self.bytes.inc_by(bytes);
    }
}

pub(crate) struct GossipCounters {
    incoming: [Traffic; MessageType::ALL.len()],
    outgoing: [Traffic; MessageType::ALL.len()],
    relayed: [IntCounter; MessageType::ALL.len()],
    dropped: [IntCounter; Dropped::ALL.len()],
    pub rate_limited_nid: IntCounter,
    pub rate_limited_host: IntCounter,
    pub dropped_rate_limited: IntCounter,
    pub dropped_outbox_full: IntCounter,
}

fn index(t: MessageType) -> usize {
    MessageType::ALL.iter().position(|x| *x == t).unwrap_or(0)
}

impl GossipCounters {
    pub(crate) fn new(m: &P2pMetrics) -> Self {
        let traffic = |direction: &str, t: MessageType| Traffic {
            messages: m.messages.with_label_values(&[direction, type_label(t)]),
            bytes: m
                .message_bytes
                .with_label_values(&[direction, type_label(t)]),
        };
        Self {
            incoming: MessageType::ALL.map(|t| traffic("in", t)),
            outgoing: MessageType::ALL.map(|t| traffic("out", t)),
            relayed: MessageType::ALL.map(|t| m.relayed.with_label_values(&[type_label(t)])),
            dropped: Dropped::ALL.map(|d| m.dropped.with_label_values(&[d.label()])),
            rate_limited_nid: m.rate_limited.with_label_values(&["nid"]),
            rate_limited_host: m.rate_limited.with_label_values(&["host"]),
            dropped_rate_limited: m.dropped.with_label_values(&["rate_limited"]),
            dropped_outbox_full: m.dropped.with_label_values(&["outbox_full"]),
        }
    }

    pub(crate) fn incoming(&self, t: MessageType) -> &Traffic {
        &self.incoming[index(t)]
    }

    pub(crate) fn outgoing(&self, t: MessageType) -> &Traffic {
        &self.outgoing[index(t)]
    }

    pub(crate) fn relayed(&self, t: MessageType) -> &IntCounter {
        &self.relayed[index(t)]
    }

    pub(crate) fn dropped(&self, reason: Dropped) -> &IntCounter {
        let i = Dropped::ALL.iter().position(|d| *d == reason).unwrap_or(0);
        &self.dropped[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_handle_counts_its_own_series() {
        let metrics = seedd_core::metrics::Metrics::new().unwrap();
        let c = GossipCounters::new(&metrics.p2p);
        c.incoming(MessageType::RefsAnnouncement).count(2, 300);
        c.outgoing(MessageType::Ping).count(1, 10);
        c.relayed(MessageType::InventoryAnnouncement).inc_by(5);
        c.dropped(Dropped::Stale).inc();
        let p = &metrics.p2p;
        assert_eq!(p.messages.with_label_values(&["in", "refs"]).get(), 2);
        assert_eq!(
            p.message_bytes.with_label_values(&["in", "refs"]).get(),
            300
        );
        assert_eq!(p.messages.with_label_values(&["out", "ping"]).get(), 1);
        assert_eq!(p.messages.with_label_values(&["in", "ping"]).get(), 0);
        assert_eq!(p.relayed.with_label_values(&["inventory"]).get(), 5);
        assert_eq!(p.dropped.with_label_values(&["stale"]).get(), 1);
        assert_eq!(p.dropped.with_label_values(&["own"]).get(), 0);
    }
}
