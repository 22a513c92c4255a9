//! Controller-to-broker request batching (reference §5), mirroring
//! `kctl.reference.request_batch.ReferenceRequestBatch`: per-broker accumulation in insertion order,
//! sticky `is_new` and delete flags, the -2 sentinels for topics queued for deletion, and a flush in
//! Kafka's order (LeaderAndIsr, UpdateMetadata, StopReplica) to the brokers registered at send time.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::hash::{IndexMap, IndexSet};

use crate::context::{Context, Part, Replicas};
use crate::model::{
    BrokerId, LeaderIsrAndControllerEpoch, LeaderRecoveryState, ReplicaAssignment,
    EPOCH_DURING_DELETE, LEADER_DURING_DELETE, NO_EPOCH,
};

/// A partition's state as one `add_leader_and_isr` call gives it to every recipient (shared by
/// their entries: a broker failure at a million partitions adds hundreds of thousands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrState {
    pub part: Part,
    pub controller_epoch: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Replicas,
    pub partition_epoch: i32,
    pub replicas: Replicas,
    pub adding: Replicas,
    pub removing: Replicas,
    pub recovery: LeaderRecoveryState,
}

/// One broker's LeaderAndIsr entry for a partition: the shared state and the broker's own
/// (sticky) `is_new` flag. Reads the state's fields through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrEntry {
    pub state: Arc<LeaderAndIsrState>,
    pub is_new: bool,
}

impl std::ops::Deref for LeaderAndIsrEntry {
    type Target = LeaderAndIsrState;

    fn deref(&self) -> &LeaderAndIsrState {
        &self.state
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataEntry {
    pub part: Part,
    pub controller_epoch: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Replicas,
    pub partition_epoch: i32,
    pub replicas: Replicas,
    pub offline_replicas: Replicas,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopReplicaEntry {
    pub part: Part,
    pub leader_epoch: i32,
    pub delete: bool,
}

/// The fields LeaderAndIsr and UpdateMetadata partition states start with (after the key):
/// controller epoch, leader, leader epoch, ISR, partition epoch, replicas.
pub type Head<'a> = (i32, i32, i32, &'a [i32], i32, &'a [i32]);

pub trait HasHead {
    fn head(&self) -> Head<'_>;
}

macro_rules! has_head {
    ($($entry:ty),*) => {$(
        impl HasHead for $entry {
            fn head(&self) -> Head<'_> {
                let e = self;
                (e.controller_epoch, e.leader, e.leader_epoch, &e.isr, e.partition_epoch, &e.replicas)
            }
        }
    )*};
}

has_head!(LeaderAndIsrEntry, UpdateMetadataEntry);

/// One request as sent (payloads are snapshots taken when the entries were added).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    LeaderAndIsr {
        broker: BrokerId,
        broker_epoch: i64,
        entries: Vec<LeaderAndIsrEntry>,
        live_leaders: Vec<BrokerId>,
    },
    UpdateMetadata {
        broker: BrokerId,
        broker_epoch: i64,
        entries: std::sync::Arc<Vec<UpdateMetadataEntry>>,
    },
    StopReplica {
        broker: BrokerId,
        broker_epoch: i64,
        delete_partitions: bool,
        entries: Vec<StopReplicaEntry>,
    },
}

/// A partition's LeaderAndIsr state, to share among its recipients.
fn leader_and_isr_state(
    p: Part,
    lice: &LeaderIsrAndControllerEpoch,
    (replicas, adding, removing): (&[BrokerId], &[BrokerId], &[BrokerId]),
) -> Arc<LeaderAndIsrState> {
    let lai = &lice.leader_and_isr;
    Arc::new(LeaderAndIsrState {
        part: p,
        controller_epoch: lice.controller_epoch,
        leader: lai.leader,
        leader_epoch: lai.leader_epoch,
        isr: lai.isr.clone(),
        partition_epoch: lai.partition_epoch,
        replicas: replicas.into(),
        adding: adding.into(),
        removing: removing.into(),
        recovery: lai.recovery,
    })
}

#[derive(Debug, Default)]
pub struct RequestBatch {
    leader_and_isr: BTreeMap<BrokerId, IndexMap<Part, LeaderAndIsrEntry>>,
    stop_replica: BTreeMap<BrokerId, IndexMap<Part, StopReplicaEntry>>,
    update_metadata_brokers: IndexSet<BrokerId>,
    update_metadata_parts: IndexMap<Part, UpdateMetadataEntry>,
    /// The keys of `update_metadata_parts` as bits by partition index: a membership test that
    /// stays in cache where a lookup in a million-entry map would not.
    update_metadata_bits: Vec<u64>,
    /// The states `add_leader_and_isr_unchanged` made, by partition index, to share.
    unchanged_states: Vec<Option<Arc<LeaderAndIsrState>>>,
    /// The context's live generation whose brokers are all in `update_metadata_brokers` already
    /// (adding a partition for every registered broker is then no per-broker work).
    update_metadata_generation: Option<u64>,
}

impl RequestBatch {
    /// The error of `newBatch()` on a batch that was not sent (reference §5.3), if any.
    pub fn check_empty(&self) -> Result<(), String> {
        let pending: [(&str, Vec<BrokerId>); 3] = [
            (
                "LeaderAndIsr",
                self.leader_and_isr.keys().copied().collect(),
            ),
            ("StopReplica", self.stop_replica.keys().copied().collect()),
            ("UpdateMetadata", {
                let mut b: Vec<BrokerId> = self.update_metadata_brokers.iter().copied().collect();
                b.sort_unstable();
                b
            }),
        ];
        for (name, brokers) in pending {
            if !brokers.is_empty() {
                return Err(format!(
                    "Controller to broker state change requests batch is not empty while creating a new one. Some {name} state changes to brokers [{}] might be lost",
                    brokers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(())
    }

    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Make room for the UpdateMetadata entries of a bulk state change of `partitions` (each adds
    /// at most one), so the map is not grown and rehashed step by step.
    pub fn reserve(&mut self, partitions: usize) {
        self.update_metadata_parts.reserve(partitions);
    }

    pub fn add_leader_and_isr(
        &mut self,
        ctx: &Context,
        brokers: &[BrokerId],
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        assignment: &ReplicaAssignment,
        is_new: bool,
    ) {
        let lists = (
            &assignment.replicas[..],
            &assignment.adding[..],
            &assignment.removing[..],
        );
        self.add_leader_and_isr_state(ctx, brokers, p, lice, lists, is_new);
    }

    /// [`Self::add_leader_and_isr`] with the partition's assignment as the context has it (read
    /// in place, not copied into a `ReplicaAssignment` first).
    pub fn add_leader_and_isr_assigned(
        &mut self,
        ctx: &Context,
        brokers: &[BrokerId],
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        is_new: bool,
    ) {
        let (adding, removing) = ctx.reassignment_lists(p);
        self.add_leader_and_isr_state(
            ctx,
            brokers,
            p,
            lice,
            (ctx.replicas(p), adding, removing),
            is_new,
        );
    }

    /// [`Self::add_leader_and_isr_assigned`] with the context's cached leadership (nothing when
    /// there is none), for a caller that knows nothing a partition's LeaderAndIsr state or
    /// UpdateMetadata entry reads (leadership, replicas, brokers, deletions) changed since this
    /// batch last made them through this method: they would come out the same, so the state is
    /// shared and the entry stands. A failover adds every partition once per replica, so this
    /// makes one state and one entry where it made three of each.
    /// `expected`: how many entries the broker's request is about to get (sizes a new one).
    pub fn add_leader_and_isr_unchanged(
        &mut self,
        ctx: &Context,
        broker: BrokerId,
        p: Part,
        expected: usize,
    ) {
        let i = p as usize;
        let state = match self.unchanged_states.get(i) {
            Some(Some(state)) => state.clone(),
            _ => {
                let Some(lice) = ctx.leadership(p) else {
                    return;
                };
                let (adding, removing) = ctx.reassignment_lists(p);
                let state = leader_and_isr_state(p, &lice, (ctx.replicas(p), adding, removing));
                if self.unchanged_states.len() <= i {
                    self.unchanged_states
                        .resize(ctx.partition_count().max(i + 1), None);
                }
                self.unchanged_states[i] = Some(state.clone());
                state
            }
        };
        self.put_leader_and_isr_entry(&[broker], p, &state, false, expected);
        self.register_update_metadata_brokers(ctx);
        if !self.has_update_metadata(p) {
            self.add_update_metadata(ctx, &[], &[p]);
        }
    }

    fn add_leader_and_isr_state(
        &mut self,
        ctx: &Context,
        brokers: &[BrokerId],
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        lists: (&[BrokerId], &[BrokerId], &[BrokerId]),
        is_new: bool,
    ) {
        let state = leader_and_isr_state(p, lice, lists);
        self.put_leader_and_isr_entry(brokers, p, &state, is_new, 0);
        self.add_update_metadata_for_registered(ctx, &[p]);
    }

    fn put_leader_and_isr_entry(
        &mut self,
        brokers: &[BrokerId],
        p: Part,
        state: &Arc<LeaderAndIsrState>,
        is_new: bool,
        expected: usize,
    ) {
        for broker in brokers.iter().copied().filter(|b| *b >= 0) {
            // Replaced in place (the partition keeps its position), with a sticky `is_new`.
            self.leader_and_isr
                .entry(broker)
                .or_insert_with(|| IndexMap::with_capacity_and_hasher(expected, Default::default()))
                .entry(p)
                .and_modify(|old| {
                    old.state = state.clone();
                    old.is_new |= is_new;
                })
                .or_insert_with(|| LeaderAndIsrEntry {
                    state: state.clone(),
                    is_new,
                });
        }
    }

    /// `add_update_metadata` for every live or shutting-down broker.
    pub fn add_update_metadata_for_registered(&mut self, ctx: &Context, parts: &[Part]) {
        self.register_update_metadata_brokers(ctx);
        self.add_update_metadata(ctx, &[], parts);
    }

    fn register_update_metadata_brokers(&mut self, ctx: &Context) {
        if self.update_metadata_generation != Some(ctx.live_generation()) {
            self.update_metadata_brokers
                .extend(ctx.registered_broker_ids().filter(|b| *b >= 0));
            self.update_metadata_generation = Some(ctx.live_generation());
        }
    }

    fn has_update_metadata(&self, p: Part) -> bool {
        self.update_metadata_bits
            .get(p as usize / 64)
            .is_some_and(|word| word & (1 << (p % 64)) != 0)
    }

    pub fn add_update_metadata(&mut self, ctx: &Context, brokers: &[BrokerId], parts: &[Part]) {
        self.update_metadata_brokers
            .extend(brokers.iter().copied().filter(|b| *b >= 0));
        for &p in parts {
            let Some(lice) = ctx.leadership(p) else {
                continue;
            };
            let lai = lice.leader_and_isr;
            let replicas = ctx.replicas(p);
            let offline = replicas
                .iter()
                .copied()
                .filter(|r| !ctx.is_replica_online(*r, p, false))
                .collect();
            let (leader, leader_epoch, version) =
                if ctx.is_topic_idx_queued_up_for_deletion(ctx.partition_topic(p)) {
                    (LEADER_DURING_DELETE, 0, 0)
                } else {
                    (lai.leader, lai.leader_epoch, lai.partition_epoch)
                };
            let (word, bit) = (p as usize / 64, p % 64);
            if self.update_metadata_bits.len() <= word {
                self.update_metadata_bits.resize(word + 1, 0);
            }
            self.update_metadata_bits[word] |= 1 << bit;
            self.update_metadata_parts.insert(
                p,
                UpdateMetadataEntry {
                    part: p,
                    controller_epoch: lice.controller_epoch,
                    leader,
                    leader_epoch,
                    isr: lai.isr,
                    partition_epoch: version,
                    replicas: replicas.into(),
                    offline_replicas: offline,
                },
            );
        }
    }

    pub fn add_stop_replica(&mut self, ctx: &Context, brokers: &[BrokerId], p: Part, delete: bool) {
        let leader_epoch = if ctx.is_topic_idx_queued_up_for_deletion(ctx.partition_topic(p)) {
            EPOCH_DURING_DELETE
        } else if ctx.has_leadership(p) {
            ctx.leader_epoch(p)
        } else {
            NO_EPOCH
        };
        for broker in brokers.iter().copied().filter(|b| *b >= 0) {
            // Replaced in place, with a sticky `delete`.
            self.stop_replica
                .entry(broker)
                .or_default()
                .entry(p)
                .and_modify(|old| {
                    old.leader_epoch = leader_epoch;
                    old.delete |= delete;
                })
                .or_insert(StopReplicaEntry {
                    part: p,
                    leader_epoch,
                    delete,
                });
        }
    }

    pub fn pending_leader_and_isr(&self) -> &BTreeMap<BrokerId, IndexMap<Part, LeaderAndIsrEntry>> {
        &self.leader_and_isr
    }

    pub fn pending_stop_replica(&self) -> &BTreeMap<BrokerId, IndexMap<Part, StopReplicaEntry>> {
        &self.stop_replica
    }

    pub fn pending_update_metadata(&self) -> (Vec<BrokerId>, Vec<&UpdateMetadataEntry>) {
        (
            self.update_metadata_brokers.iter().copied().collect(),
            self.update_metadata_parts.values().collect(),
        )
    }

    /// Flush to the brokers registered now; `log` receives Kafka's INFO lines in order.
    pub fn send(
        &mut self,
        ctx: &Context,
        stop_replica_version: i32,
        log: &mut dyn FnMut(String),
    ) -> Vec<Sent> {
        let mut sent = Vec::new();
        let epoch = |b: BrokerId| ctx.live_broker_epoch(b).unwrap_or(-1);

        for (broker, states) in std::mem::take(&mut self.leader_and_isr) {
            if !ctx.is_registered(broker) {
                continue;
            }
            let leaders = states.values().filter(|s| s.leader == broker).count();
            log(format!(
                "Sending LeaderAndIsr request to broker {broker} with {leaders} become-leader and {} become-follower partitions",
                states.len() - leaders
            ));
            let mut live_leaders: Vec<BrokerId> = states.values().map(|s| s.leader).collect();
            live_leaders.sort_unstable();
            live_leaders.dedup();
            live_leaders.retain(|b| ctx.is_registered(*b));
            sent.push(Sent::LeaderAndIsr {
                broker,
                broker_epoch: epoch(broker),
                entries: states.into_values().collect(),
                live_leaders,
            });
        }

        if self.update_metadata_brokers.is_empty() {
            self.update_metadata_parts.clear();
        } else {
            let mut requested: Vec<BrokerId> =
                self.update_metadata_brokers.iter().copied().collect();
            requested.sort_unstable();
            log(format!(
                "Sending UpdateMetadata request to brokers [{}] for {} partitions",
                requested
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                self.update_metadata_parts.len()
            ));
            let entries: std::sync::Arc<Vec<UpdateMetadataEntry>> = std::sync::Arc::new(
                std::mem::take(&mut self.update_metadata_parts)
                    .into_values()
                    .collect(),
            );
            for broker in requested.into_iter().filter(|b| ctx.is_registered(*b)) {
                sent.push(Sent::UpdateMetadata {
                    broker,
                    broker_epoch: epoch(broker),
                    entries: entries.clone(),
                });
            }
            self.update_metadata_brokers.clear();
        }
        self.update_metadata_generation = None;
        self.update_metadata_bits.clear();
        self.unchanged_states.clear();

        for (broker, states) in std::mem::take(&mut self.stop_replica) {
            if !ctx.is_registered(broker) {
                continue;
            }
            if stop_replica_version >= 3 {
                // Grouped by topic, topics in order of first appearance.
                let mut by_topic: IndexMap<u32, Vec<StopReplicaEntry>> = IndexMap::default();
                for s in states.values() {
                    by_topic
                        .entry(ctx.partition_topic(s.part))
                        .or_default()
                        .push(*s);
                }
                log(format!(
                    "Sending StopReplica request for {} replicas to broker {broker}",
                    states.len()
                ));
                sent.push(Sent::StopReplica {
                    broker,
                    broker_epoch: epoch(broker),
                    delete_partitions: false,
                    entries: by_topic.into_values().flatten().collect(),
                });
                continue;
            }
            let (to_delete, to_stop): (Vec<StopReplicaEntry>, Vec<StopReplicaEntry>) =
                states.values().copied().partition(|s| s.delete);
            if !to_delete.is_empty() {
                log(format!(
                    "Sending StopReplica request (delete = true) for {} replicas to broker {broker}",
                    to_delete.len()
                ));
                sent.push(Sent::StopReplica {
                    broker,
                    broker_epoch: epoch(broker),
                    delete_partitions: true,
                    entries: to_delete,
                });
            }
            if !to_stop.is_empty() {
                log(format!(
                    "Sending StopReplica request (delete = false) for {} replicas to broker {broker}",
                    to_stop.len()
                ));
                sent.push(Sent::StopReplica {
                    broker,
                    broker_epoch: epoch(broker),
                    delete_partitions: false,
                    entries: to_stop,
                });
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LeaderAndIsr;

    #[test]
    fn update_metadata_for_registered_brokers_follows_the_live_set_across_sends() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        let p = ctx.intern_part("t", 0);
        ctx.put_leadership(
            p,
            &LeaderIsrAndControllerEpoch {
                leader_and_isr: LeaderAndIsr::new(1, smallvec::smallvec![1]),
                controller_epoch: 1,
            },
        );
        let mut batch = RequestBatch::default();
        let recipients = |sent: &[Sent]| -> Vec<BrokerId> {
            sent.iter()
                .filter_map(|s| match s {
                    Sent::UpdateMetadata { broker, .. } => Some(*broker),
                    _ => None,
                })
                .collect()
        };
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        assert_eq!(recipients(&batch.send(&ctx, 3, &mut |_| {})), vec![1, 2]);
        // The same live set after a send: the brokers must be added again.
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        assert_eq!(recipients(&batch.send(&ctx, 3, &mut |_| {})), vec![1, 2]);
        // A broker joins between two additions to one batch: it gets the request too.
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        ctx.add_live_brokers(&[(3, 30)]);
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        assert_eq!(recipients(&batch.send(&ctx, 3, &mut |_| {})), vec![1, 2, 3]);
    }

    #[test]
    fn sticky_flags_sentinels_and_order() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        let p = ctx.intern_part("t", 0);
        let ra = ReplicaAssignment {
            replicas: smallvec::smallvec![1, 2],
            ..Default::default()
        };
        ctx.update_assignment(p, &ra);
        let lice = LeaderIsrAndControllerEpoch {
            leader_and_isr: LeaderAndIsr::new(1, smallvec::smallvec![1, 2]),
            controller_epoch: 3,
        };
        ctx.put_leadership(p, &lice);

        let mut batch = RequestBatch::default();
        batch.add_leader_and_isr(&ctx, &[1, -1], p, &lice, &ra, true);
        batch.add_leader_and_isr(&ctx, &[1], p, &lice, &ra, false);
        assert!(
            batch.pending_leader_and_isr()[&1][&p].is_new,
            "is_new is sticky"
        );
        batch.add_stop_replica(&ctx, &[2], p, true);
        batch.add_stop_replica(&ctx, &[2], p, false);
        assert!(
            batch.pending_stop_replica()[&2][&p].delete,
            "delete is sticky"
        );
        assert!(batch.check_empty().is_err());

        ctx.queue_topic_deletion(&["t"]);
        batch.add_update_metadata(&ctx, &[], &[p]);
        let mut lines = Vec::new();
        let sent = batch.send(&ctx, 3, &mut |l| lines.push(l));
        assert!(matches!(
            sent[0],
            Sent::LeaderAndIsr {
                broker: 1,
                broker_epoch: 10,
                ..
            }
        ));
        let Sent::UpdateMetadata { entries, .. } = &sent[1] else {
            panic!("UpdateMetadata second")
        };
        assert_eq!(
            (entries[0].leader, entries[0].leader_epoch),
            (LEADER_DURING_DELETE, 0)
        );
        assert!(
            matches!(&sent[3], Sent::StopReplica { broker: 2, entries, .. } if entries[0].delete)
        );
        assert_eq!(lines[0], "Sending LeaderAndIsr request to broker 1 with 1 become-leader and 0 become-follower partitions");
        assert!(batch.check_empty().is_ok());
    }
}
