//! The core's outputs carried out (under the core lock): sends encoded once per link onto
//! bounded outboxes, Subscribe answers streamed in batches as the outbox frees, changes to the
//! persistence queue, events to metrics, closes and penalties; plus the periodic tick.

use super::*;

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock would be a bug; keep serving with the state as is.
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn dialers_lock(
        &self,
    ) -> MutexGuard<'_, HashMap<NodeId, (String, CancellationToken)>> {
        self.dialers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Carries out the service's outputs. Called with the core lock held.
    pub(crate) fn dispatch(&self, core: &mut Core, outputs: Vec<Output>) {
        let mut changes = Vec::new();
        for output in outputs {
            match output {
                Output::Send { to, message } => self.send(core, &to, &message),
                Output::Disconnect { session, reason } => {
                    self.close_session(core, session, reason.label());
                    if let DisconnectReason::InvalidSignature
                    | DisconnectReason::InvalidTimestamp { .. } = reason
                    {
                        let offence = if matches!(reason, DisconnectReason::InvalidSignature) {
                            Offence::InvalidSignature
                        } else {
                            Offence::InvalidTimestamp
                        };
                        if let Some(h) = core.sessions.get(&session) {
                            let ip = h.addr.ip();
                            let nid = h.nid;
                            tracing::warn!(peer = %nid, addr = %h.addr, %reason, "peer misbehaved; disconnecting");
                            self.penalise(core, ip, offence, &reason.to_string());
                        }
                    } else {
                        tracing::info!(session, %reason, "disconnecting peer");
                    }
                }
                Output::Persist(change) => changes.push(change),
                Output::Event(event) => self.event(event),
                Output::SubscribeAnswer(answer) => self.answer(core, answer),
            }
        }
        if !changes.is_empty() {
            self.persist.push(changes);
        }
    }

    fn event(&self, event: Event) {
        match event {
            Event::Dropped { reason, .. } => self.counters.dropped(reason).inc(),
            Event::Relayed { kind, peers } => {
                self.counters.relayed(kind).inc_by(peers as u64);
            }
            Event::InventoryTruncated { total, announced } => {
                tracing::warn!(
                    total,
                    announced,
                    "inventory exceeds the {announced}-repository message cap; other nodes will see only part of it"
                );
            }
            Event::RefsSynced { rid, remote } => {
                tracing::debug!(%rid, %remote, "peer reports it is synced with us");
            }
            Event::Pong { .. } => {}
            Event::Seeds {
                author,
                rids,
                clone_only,
                ..
            } => {
                tracing::debug!(%author, repos = rids.len(), clone_only, "peer seeds repositories we seed");
                let _ = self.hints.send(FetchHint {
                    from: author,
                    rids,
                    clone_only,
                });
            }
        }
    }

    /// Starts streaming a Subscribe answer to its session (see [`stream_answer`]).
    fn answer(&self, core: &mut Core, answer: SubscribeAnswer) {
        let (Some(h), Some(me), Ok(rt)) = (
            core.sessions.get(&answer.session),
            self.me.upgrade(),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        rt.spawn(stream_answer(me, answer, h.outbox.clone(), h.link));
    }

    /// Encodes `message` once per link and queues it on each target's outbox (counted once,
    /// with handles resolved at start: a relay reaches every session).
    fn send(&self, core: &mut Core, to: &[SessionId], message: &Message) {
        let kind = message.message_type();
        let mut cache: [Option<Bytes>; 2] = [None, None];
        let mut slow = Vec::new();
        let (mut sent, mut bytes_sent) = (0u64, 0u64);
        for id in to {
            let Some(h) = core.sessions.get(id) else {
                continue;
            };
            let slot = match h.link {
                Link::Outbound => 0,
                Link::Inbound => 1,
            };
            let bytes = match &cache[slot] {
                Some(b) => b.clone(),
                None => match Frame::gossip(h.link, message.clone()).encode() {
                    Ok(v) => {
                        let b = Bytes::from(v);
                        cache[slot] = Some(b.clone());
                        b
                    }
                    Err(e) => {
                        tracing::error!(error = %seedd_core::logging::chain(&e), kind = type_label(kind), "cannot encode our own message; not sent");
                        return;
                    }
                },
            };
            let len = bytes.len() as u64;
            match h.outbox.try_send(Outgoing::Frame {
                bytes,
                permit: None,
            }) {
                Ok(()) => {
                    sent += 1;
                    bytes_sent += len;
                }
                Err(_) => slow.push(*id),
            }
        }
        self.counters.outgoing(kind).count(sent, bytes_sent);
        if !slow.is_empty() {
            self.counters.dropped_outbox_full.inc_by(slow.len() as u64);
        }
        for id in slow {
            tracing::warn!(session = id, "peer is not reading; disconnecting");
            self.close_session(core, id, "outbox_full");
        }
    }

    /// Marks a session for closing; its task ends and cleans up.
    pub(crate) fn close_session(&self, core: &mut Core, id: SessionId, reason: &'static str) {
        if let Some(h) = core.sessions.get(&id) {
            if let Ok(mut r) = h.close_reason.lock() {
                r.get_or_insert(reason);
            }
            h.cancel.cancel();
        }
    }

    /// Adds a penalty to `ip`; at the threshold bans it and drops its sessions.
    pub(crate) fn penalise(&self, core: &mut Core, ip: IpAddr, offence: Offence, reason: &str) {
        let now = now_ms();
        let p = core.guard.penalise(ip, offence, reason, now);
        self.metrics
            .p2p
            .penalties
            .with_label_values(&[offence.label()])
            .inc();
        if let Err(e) = self.index.put_ban(&p.record) {
            tracing::error!(error = %seedd_core::logging::chain(&e), %ip, "cannot persist penalty");
        }
        if p.newly_banned {
            self.metrics.p2p.bans.inc();
            self.metrics
                .p2p
                .banned_ips
                .set(core.guard.banned_count(now) as i64);
            tracing::warn!(%ip, penalty = p.record.penalty, until_ms = ?p.record.banned_until, "banned peer IP");
            let ids: Vec<SessionId> = core
                .sessions
                .iter()
                .filter(|(_, h)| h.addr.ip() == ip)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                self.close_session(core, id, "banned");
            }
        }
    }
}

/// Announcements per Subscribe-answer batch (one short core-lock hold each).
const ANSWER_BATCH: usize = 64;
/// Outbox slots a Subscribe answer leaves free for other gossip (whose queueing never waits:
/// a full outbox drops the session).
const ANSWER_HEADROOM: usize = 256;

/// Streams a Subscribe answer into a session's outbox in batches, each once the outbox has
/// room for it plus [`ANSWER_HEADROOM`]: an answer larger than the outbox reaches a peer that
/// reads, instead of dropping it as a slow reader, and the store is read a batch at a time.
/// Ends with the answer, the session (outbox closed), or a newer Subscribe.
async fn stream_answer(
    shared: Arc<Shared>,
    mut answer: SubscribeAnswer,
    outbox: mpsc::Sender<Outgoing>,
    link: Link,
) {
    loop {
        let Ok(mut permits) = outbox.reserve_many(ANSWER_BATCH + ANSWER_HEADROOM).await else {
            return;
        };
        let (anns, done) = {
            let mut core = shared.lock();
            core.service
                .subscribe_answer(&mut answer, ANSWER_BATCH, now_ms())
        };
        for ann in anns {
            let message = Message::Announcement(ann);
            let kind = message.message_type();
            let bytes = match Frame::gossip(link, message).encode() {
                Ok(v) => Bytes::from(v),
                Err(e) => {
                    tracing::error!(error = %seedd_core::logging::chain(&e), kind = type_label(kind), "cannot encode a stored announcement; not sent");
                    continue;
                }
            };
            let Some(permit) = permits.next() else {
                break;
            };
            let len = bytes.len() as u64;
            permit.send(Outgoing::Frame {
                bytes,
                permit: None,
            });
            shared.counters.outgoing(kind).count(1, len);
        }
        if done {
            return;
        }
    }
}

/// Feeds the service its timer and refreshes gauges.
pub(super) async fn ticker(shared: Arc<Shared>) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        n += 1;
        let now = now_ms();
        let mut core = shared.lock();
        core.service.tick(now);
        let outputs = core.service.take_outputs();
        shared.dispatch(&mut core, outputs);
        if n % 60 == 0 {
            core.guard.prune(now);
        }
        let m = &shared.metrics.p2p;
        m.routing_entries.set(core.service.routing_len() as i64);
        m.address_book.set(core.service.nodes().count() as i64);
        m.stored_announcements
            .set(core.service.stored_announcements() as i64);
        m.banned_ips.set(core.guard.banned_count(now) as i64);
    }
}
