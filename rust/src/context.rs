//! The columnar controller context (Kafka's ControllerContext, reference §1.4).
//!
//! Partitions are dense indices (`Part`) into per-partition arrays; topics are interned. The
//! observable behaviour is exactly `kctl.reference.context.ReferenceContext`'s, including *context
//! order*: topics in the order they were first given an assignment, partitions of a topic likewise,
//! brokers ascending. A partition keeps its index when its topic is removed and re-created, so its
//! partition and replica states carry over as they do in the reference's dicts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use crate::hash::{HashMap, HashSet, IndexSet};
use smallvec::SmallVec;

use crate::model::{
    BrokerId, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState, PartitionState,
    ReplicaAssignment, ReplicaState,
};

pub type Part = u32;
pub type TopicIdx = u32;
pub type Replicas = crate::model::Brokers;
/// A replica: a partition and the broker hosting it.
pub type Replica = (Part, BrokerId);

const NO_LEADERSHIP: i32 = i32::MIN;
const NO_STATE: u8 = u8::MAX;
/// Replicas of an assignment whose states have a slot (`Context::r_states`): a nibble each.
const STATE_SLOTS: usize = 8;
const ABSENT: Part = Part::MAX;

#[derive(Debug, Default)]
struct Topic {
    /// Shared with the request payloads that name the topic.
    name: Arc<str>,
    topic_id: Option<String>,
    /// Partition id → index (`ABSENT` for ids never seen).
    by_id: Vec<Part>,
    /// Partitions with an assignment, in the order they got it.
    assigned: Vec<Part>,
    /// Whether `assigned` is out of index order (a partition given an assignment after one with
    /// a higher index), so that its order is not the indices'.
    unordered: bool,
}

/// Partitions whose assignment changed, for a reader that caches assignments (the Python side
/// caches whole topics' assignments, which the controller rewrites once per reassigned partition).
#[derive(Debug, Default)]
enum AssignmentJournal {
    /// Nobody reads it.
    #[default]
    Off,
    /// Changed since the last read, in order, repeats included.
    Tracking(Vec<Part>),
    /// More changes than kept, a topic removed or the context reset: the reader starts over.
    Lost,
}

/// Changes kept between two reads of the journal before it gives up on them.
const ASSIGNMENT_JOURNAL_LIMIT: usize = 1 << 16;

/// The reassignment lists of the (few) partitions that have them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Moving {
    adding: Replicas,
    removing: Replicas,
}

#[derive(Debug, Default)]
pub struct Context {
    pub epoch: i32,
    pub epoch_zk_version: i32,
    live: BTreeMap<BrokerId, i64>,
    live_generation: u64,
    /// Per broker id below `DENSE_BROKER_IDS`: `REGISTERED` | `SHUTTING_DOWN`.
    broker_flags: Vec<u8>,
    shutting_down: BTreeSet<BrokerId>,
    offline_dirs: HashMap<BrokerId, HashSet<Part>>,

    topic_index: HashMap<String, TopicIdx>,
    topics: Vec<Topic>,
    all_topics: IndexSet<TopicIdx>,
    /// Topics with assigned partitions, in context order.
    assigned_topics: IndexSet<TopicIdx>,

    p_topic: Vec<TopicIdx>,
    p_id: Vec<i32>,
    has_assignment: Vec<bool>,
    replicas: Vec<Replicas>,
    moving: HashMap<Part, Moving>,
    leader: Vec<i32>,
    leader_epoch: Vec<i32>,
    partition_epoch: Vec<i32>,
    controller_epoch: Vec<i32>,
    recovery: Vec<LeaderRecoveryState>,
    isr: Vec<Replicas>,
    p_state: Vec<u8>,
    /// Partitions in the New or Offline state, and how many, for `partitions_to_trigger_online`
    /// to visit instead of every partition: each such partition is in `awaiting` (with repeats
    /// and partitions that left those states, dropped as it grows).
    awaiting: Vec<Part>,
    awaiting_count: usize,
    /// The replica states of the first `STATE_SLOTS` replicas of each assignment, by position: a
    /// nibble each, the state's id (0: none). A list of `(broker, state)` per partition took 32
    /// bytes; the replicas of an assignment are the brokers that have states but for a few.
    r_states: Vec<u32>,
    /// The states of replicas that have no slot: not (or no longer) in their partition's
    /// assignment (removed by a reassignment, their topic deleted) or beyond its first slots.
    r_states_unslotted: HashMap<Part, SmallVec<[(BrokerId, ReplicaState); 2]>>,

    being_reassigned: IndexSet<Part>,
    assignment_changes: AssignmentJournal,
    to_be_deleted: IndexSet<TopicIdx>,
    deletion_started: IndexSet<TopicIdx>,
    ineligible: IndexSet<TopicIdx>,

    offline_partition_count: i64,
    imbalance_count: i64,
    unclean_elections: i64,
    /// Partitions led per broker (cached leadership), kept as leadership changes.
    leaders_per_broker: BrokerTally,
    /// Partitions with a replica per broker (assignments), kept as assignments change.
    replicas_per_broker: BrokerTally,
    /// Cached leaders that are no broker (`NO_LEADER`, or any other negative id): partitions
    /// whose leader is offline whichever brokers are registered.
    negative_leaders: i64,
    /// Each broker's partitions, made when first asked (see [`ReplicaIndex`]).
    replica_index: OnceLock<ReplicaIndex>,
}

/// Each broker's partitions (those with a replica on it) in context order, so that a broker's
/// failure or controlled shutdown finds its replicas (30K at 1M partitions) without reading every
/// partition's replicas.
/// Made by one scan when first asked, and kept while assignments only grow at the end of the
/// context order (a topic created); any other change of an assignment drops it. 4 bytes per
/// replica.
#[derive(Debug, Default)]
struct ReplicaIndex {
    /// By broker id below `DENSE_BROKER_IDS`.
    dense: Vec<Vec<Part>>,
    sparse: BTreeMap<BrokerId, Vec<Part>>,
}

impl ReplicaIndex {
    /// Add `p` for each broker of its replica list, once per broker.
    fn add(&mut self, p: Part, replicas: &[BrokerId]) {
        for (k, &b) in replicas.iter().enumerate() {
            if !replicas[..k].contains(&b) {
                self.list(b).push(p);
            }
        }
    }

    /// The broker's list, made empty if it has none.
    fn list(&mut self, broker: BrokerId) -> &mut Vec<Part> {
        if (0..DENSE_BROKER_IDS).contains(&broker) {
            let at = broker as usize;
            if self.dense.len() <= at {
                self.dense.resize_with(at + 1, Vec::new);
            }
            &mut self.dense[at]
        } else {
            self.sparse.entry(broker).or_default()
        }
    }

    fn of(&self, broker: BrokerId) -> &[Part] {
        let parts = if (0..DENSE_BROKER_IDS).contains(&broker) {
            self.dense.get(broker as usize)
        } else {
            self.sparse.get(&broker)
        };
        parts.map_or(&[][..], Vec::as_slice)
    }

    /// Each broker's list, brokers ascending (those with none left out).
    fn by_broker(&self) -> impl Iterator<Item = (BrokerId, &[Part])> {
        let dense = (self.dense.iter().enumerate()).map(|(b, l)| (b as BrokerId, l));
        let below = self.sparse.range(..0).map(|(b, l)| (*b, l));
        let above = self.sparse.range(DENSE_BROKER_IDS..).map(|(b, l)| (*b, l));
        below
            .chain(dense)
            .chain(above)
            .filter(|(_, l)| !l.is_empty())
            .map(|(b, l)| (b, l.as_slice()))
    }

    fn heap_bytes(&self) -> usize {
        let lists = self.dense.iter().chain(self.sparse.values());
        self.dense.capacity() * std::mem::size_of::<Vec<Part>>()
            + lists.map(|l| l.capacity() * 4).sum::<usize>()
    }
}

/// A count per broker id, updated in place as partitions change (dense below
/// `DENSE_BROKER_IDS`, as the broker flags), so that reading it costs brokers, not partitions.
#[derive(Debug, Default)]
struct BrokerTally {
    dense: Vec<i64>,
    sparse: BTreeMap<BrokerId, i64>,
}

impl BrokerTally {
    fn add(&mut self, broker: BrokerId, delta: i64) {
        if (0..DENSE_BROKER_IDS).contains(&broker) {
            let at = broker as usize;
            if self.dense.len() <= at {
                self.dense.resize(at + 1, 0);
            }
            self.dense[at] += delta;
        } else {
            let count = self.sparse.entry(broker).or_insert(0);
            *count += delta;
            if *count == 0 {
                self.sparse.remove(&broker);
            }
        }
    }

    fn get(&self, broker: BrokerId) -> i64 {
        if (0..DENSE_BROKER_IDS).contains(&broker) {
            self.dense.get(broker as usize).copied().unwrap_or(0)
        } else {
            self.sparse.get(&broker).copied().unwrap_or(0)
        }
    }

    /// The brokers with a non-zero count, ascending.
    fn counts(&self) -> Vec<(BrokerId, i64)> {
        let dense = self
            .dense
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 0)
            .map(|(b, n)| (b as BrokerId, *n));
        let below = self.sparse.range(..0).map(|(b, n)| (*b, *n));
        let above = self.sparse.range(DENSE_BROKER_IDS..).map(|(b, n)| (*b, *n));
        below.chain(dense).chain(above).collect()
    }
}

/// The states `partitions_to_trigger_online` looks for.
fn awaits_online(state: PartitionState) -> bool {
    matches!(state, PartitionState::New | PartitionState::Offline)
}

fn awaits_online_id(id: u8) -> bool {
    PartitionState::from_id(id).is_some_and(awaits_online)
}

/// A run of topics in context order.
type TopicSlice = indexmap::set::Slice<TopicIdx>;

/// Partition count from which whole-cluster scans use a second thread.
const PARALLEL_SCAN: usize = 200_000;

const REGISTERED: u8 = 1;
const SHUTTING_DOWN: u8 = 2;
/// Broker ids below this get dense flags; others (rare) are looked up in the maps.
const DENSE_BROKER_IDS: BrokerId = 1 << 16;

/// The slot of `broker`'s replica state in a partition with `replicas` (its first position among
/// the first `STATE_SLOTS`).
fn state_slot(replicas: &[BrokerId], broker: BrokerId) -> Option<usize> {
    replicas.iter().take(STATE_SLOTS).position(|&r| r == broker)
}

fn slot_state(slots: u32, slot: usize) -> Option<ReplicaState> {
    match (slots >> (4 * slot)) & 0xf {
        0 => None,
        id => ReplicaState::from_id(id as u8),
    }
}

fn set_slot_state(slots: &mut u32, slot: usize, state: Option<ReplicaState>) {
    let id = state.map_or(0, |s| s as u32);
    *slots = (*slots & !(0xf << (4 * slot))) | (id << (4 * slot));
}

fn put_unslotted(
    unslotted: &mut HashMap<Part, SmallVec<[(BrokerId, ReplicaState); 2]>>,
    p: Part,
    broker: BrokerId,
    state: ReplicaState,
) {
    let states = unslotted.entry(p).or_default();
    match states.iter_mut().find(|(b, _)| *b == broker) {
        Some(entry) => entry.1 = state,
        None => states.push((broker, state)),
    }
}

fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Context {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget everything but the unclean-election meter (controller resignation).
    pub fn reset(&mut self) {
        let unclean = self.unclean_elections;
        let read = !matches!(self.assignment_changes, AssignmentJournal::Off);
        *self = Self::default();
        self.unclean_elections = unclean;
        if read {
            self.assignment_changes = AssignmentJournal::Lost;
        }
    }

    // --- Interning -----------------------------------------------------------------------------

    pub fn topic_idx(&self, name: &str) -> Option<TopicIdx> {
        self.topic_index.get(name).copied()
    }

    fn intern_topic(&mut self, name: &str) -> TopicIdx {
        if let Some(t) = self.topic_index.get(name) {
            return *t;
        }
        let t = TopicIdx::try_from(self.topics.len()).expect("fewer than 2^32 topics");
        self.topics.push(Topic {
            name: Arc::from(name),
            ..Topic::default()
        });
        self.topic_index.insert(name.to_owned(), t);
        t
    }

    pub fn topic_name(&self, t: TopicIdx) -> &str {
        &self.topics[t as usize].name
    }

    /// The topic's name as a shared string (for payloads that outlive a borrow of the context).
    pub fn topic_name_arc(&self, t: TopicIdx) -> Arc<str> {
        self.topics[t as usize].name.clone()
    }

    /// The index of an existing partition.
    pub fn part(&self, topic: &str, partition: i32) -> Option<Part> {
        let t = self.topic_idx(topic)?;
        let p = *self.topics[t as usize]
            .by_id
            .get(usize::try_from(partition).ok()?)?;
        (p != ABSENT).then_some(p)
    }

    /// The index of a partition, created (without state) if it is new.
    pub fn intern_part(&mut self, topic: &str, partition: i32) -> Part {
        if let Some(p) = self.part(topic, partition) {
            return p;
        }
        let t = self.intern_topic(topic);
        let p = Part::try_from(self.p_topic.len()).expect("fewer than 2^32 partitions");
        let id = usize::try_from(partition).expect("partition ids are not negative");
        let by_id = &mut self.topics[t as usize].by_id;
        if by_id.len() <= id {
            by_id.resize(id + 1, ABSENT);
        }
        by_id[id] = p;
        self.p_topic.push(t);
        self.p_id.push(partition);
        self.has_assignment.push(false);
        self.replicas.push(Replicas::new());
        self.leader.push(NO_LEADERSHIP);
        self.leader_epoch.push(0);
        self.partition_epoch.push(0);
        self.controller_epoch.push(0);
        self.recovery.push(LeaderRecoveryState::Recovered);
        self.isr.push(Replicas::new());
        self.p_state.push(NO_STATE);
        self.r_states.push(0);
        p
    }

    /// Make room for `additional` more partitions in every per-partition column at once. Into
    /// empty columns (a failover's load) that is the exact size: grown by doubling, a column of
    /// 10M partitions had room for 16.7M, and the allocator kept the smaller copies it freed.
    /// Columns with partitions grow as a push would, so loading topic after topic stays linear.
    pub fn reserve_partitions(&mut self, additional: usize) {
        self.p_topic.reserve(additional);
        self.p_id.reserve(additional);
        self.has_assignment.reserve(additional);
        self.replicas.reserve(additional);
        self.leader.reserve(additional);
        self.leader_epoch.reserve(additional);
        self.partition_epoch.reserve(additional);
        self.controller_epoch.reserve(additional);
        self.recovery.reserve(additional);
        self.isr.reserve(additional);
        self.p_state.reserve(additional);
        self.r_states.reserve(additional);
    }

    pub fn partition_topic(&self, p: Part) -> TopicIdx {
        self.p_topic[p as usize]
    }

    pub fn partition_id(&self, p: Part) -> i32 {
        self.p_id[p as usize]
    }

    /// `topic-partition`, as `TopicPartition.__str__`.
    pub fn tp_name(&self, p: Part) -> String {
        format!(
            "{}-{}",
            self.topic_name(self.partition_topic(p)),
            self.partition_id(p)
        )
    }

    // --- Metrics -------------------------------------------------------------------------------

    pub fn offline_partition_count(&self) -> i64 {
        self.offline_partition_count
    }

    pub fn preferred_replica_imbalance_count(&self) -> i64 {
        self.imbalance_count
    }

    pub fn unclean_leader_elections(&self) -> i64 {
        self.unclean_elections
    }

    pub fn record_unclean_leader_election(&mut self) {
        self.unclean_elections += 1;
    }

    fn is_imbalanced(&self, p: Part) -> Option<bool> {
        let i = p as usize;
        if !self.has_assignment[i] || self.leader[i] == NO_LEADERSHIP {
            return None;
        }
        let replicas = &self.replicas[i];
        let Some(&preferred) = replicas.first() else {
            return Some(false);
        };
        if let Some(moving) = self.moving.get(&p) {
            if moving.adding.contains(&preferred) {
                // An adding preferred replica only counts once it has joined the ISR.
                return Some(self.isr[i].contains(&preferred));
            }
        }
        Some(self.leader[i] != preferred)
    }

    /// Run a mutation of one partition while keeping the imbalance metric right.
    fn tracking_imbalance(&mut self, p: Part, change: impl FnOnce(&mut Self)) {
        let queued = self.to_be_deleted.contains(&self.p_topic[p as usize]);
        let before = if queued { None } else { self.is_imbalanced(p) };
        change(self);
        if queued {
            return;
        }
        if before == Some(true) {
            self.imbalance_count -= 1;
        }
        if self.is_imbalanced(p) == Some(true) {
            self.imbalance_count += 1;
        }
    }

    fn clean_imbalance(&mut self, t: TopicIdx) {
        let parts = self.topics[t as usize].assigned.clone();
        for p in parts {
            if self.is_imbalanced(p) == Some(true) {
                self.imbalance_count -= 1;
            }
        }
    }

    // --- Brokers -------------------------------------------------------------------------------

    pub fn set_live_brokers(&mut self, epochs: &[(BrokerId, i64)]) {
        self.live.clear();
        self.add_live_brokers(epochs);
    }

    pub fn add_live_brokers(&mut self, epochs: &[(BrokerId, i64)]) {
        self.live.extend(epochs.iter().copied());
        self.live_generation = next_generation();
        self.refresh_broker_flags();
    }

    pub fn remove_live_brokers(&mut self, brokers: &[BrokerId]) {
        for b in brokers {
            self.live.remove(b);
        }
        self.live_generation = next_generation();
        self.refresh_broker_flags();
    }

    /// Rebuild the dense per-broker flags from `live` and `shutting_down` (broker changes are
    /// rare; the checks they serve run per replica).
    fn refresh_broker_flags(&mut self) {
        self.broker_flags.clear();
        let dense = |b: &BrokerId| (0..DENSE_BROKER_IDS).contains(b);
        for &b in self.live.keys().filter(|b| dense(b)) {
            let at = b as usize;
            if self.broker_flags.len() <= at {
                self.broker_flags.resize(at + 1, 0);
            }
            self.broker_flags[at] = REGISTERED;
        }
        for &b in self.shutting_down.iter().filter(|b| dense(b)) {
            if let Some(flags) = self.broker_flags.get_mut(b as usize) {
                *flags |= SHUTTING_DOWN;
            }
        }
    }

    /// `REGISTERED` and `SHUTTING_DOWN` bits of a broker.
    fn broker_flags(&self, broker: BrokerId) -> u8 {
        if (0..DENSE_BROKER_IDS).contains(&broker) {
            return self.broker_flags.get(broker as usize).copied().unwrap_or(0);
        }
        let mut flags = 0;
        if self.live.contains_key(&broker) {
            flags |= REGISTERED;
            if self.shutting_down.contains(&broker) {
                flags |= SHUTTING_DOWN;
            }
        }
        flags
    }

    /// Equal generations (of any contexts) mean equal sets of registered brokers; 0 is the empty set.
    pub fn live_generation(&self) -> u64 {
        self.live_generation
    }

    /// The registered brokers (live or shutting down), in id order, without allocating.
    pub fn registered_broker_ids(&self) -> impl Iterator<Item = BrokerId> + '_ {
        self.live.keys().copied()
    }

    pub fn live_broker_ids(&self) -> Vec<BrokerId> {
        self.live
            .keys()
            .copied()
            .filter(|b| !self.shutting_down.contains(b))
            .collect()
    }

    pub fn live_or_shutting_down_broker_ids(&self) -> Vec<BrokerId> {
        self.live.keys().copied().collect()
    }

    pub fn is_registered(&self, broker: BrokerId) -> bool {
        self.broker_flags(broker) & REGISTERED != 0
    }

    pub fn is_live(&self, broker: BrokerId) -> bool {
        self.broker_flags(broker) == REGISTERED
    }

    pub fn shutting_down_broker_ids(&self) -> Vec<BrokerId> {
        self.shutting_down.iter().copied().collect()
    }

    pub fn is_shutting_down(&self, broker: BrokerId) -> bool {
        self.shutting_down.contains(&broker)
    }

    pub fn add_shutting_down_broker(&mut self, broker: BrokerId) {
        self.shutting_down.insert(broker);
        self.refresh_broker_flags();
    }

    pub fn remove_shutting_down_brokers(&mut self, brokers: &[BrokerId]) {
        for b in brokers {
            self.shutting_down.remove(b);
        }
        self.refresh_broker_flags();
    }

    pub fn live_broker_epoch(&self, broker: BrokerId) -> Option<i64> {
        self.live.get(&broker).copied()
    }

    pub fn live_broker_epochs(&self) -> Vec<(BrokerId, i64)> {
        self.live.iter().map(|(b, e)| (*b, *e)).collect()
    }

    pub fn is_replica_online(
        &self,
        broker: BrokerId,
        p: Part,
        include_shutting_down: bool,
    ) -> bool {
        let flags = self.broker_flags(broker);
        if flags & REGISTERED == 0 || (!include_shutting_down && flags & SHUTTING_DOWN != 0) {
            return false;
        }
        self.offline_dirs.is_empty()
            || self
                .offline_dirs
                .get(&broker)
                .is_none_or(|dirs| !dirs.contains(&p))
    }

    /// No entry for an empty set: every LeaderAndIsr answer without a storage error adds one,
    /// and an entry, even empty, turns off the indexed search for offline leaders.
    pub fn add_replicas_on_offline_dirs(&mut self, broker: BrokerId, parts: &[Part]) {
        if parts.is_empty() {
            return;
        }
        self.offline_dirs
            .entry(broker)
            .or_default()
            .extend(parts.iter().copied());
    }

    pub fn remove_replicas_on_offline_dirs(&mut self, broker: BrokerId, parts: &[Part]) {
        if let Some(dirs) = self.offline_dirs.get_mut(&broker) {
            for p in parts {
                dirs.remove(p);
            }
            if dirs.is_empty() {
                self.offline_dirs.remove(&broker);
            }
        }
    }

    pub fn clear_replicas_on_offline_dirs(&mut self, brokers: &[BrokerId]) {
        for b in brokers {
            self.offline_dirs.remove(b);
        }
    }

    /// The partitions on the broker's offline log directories, in context order.
    pub fn replicas_on_offline_dirs(&self, broker: BrokerId) -> Vec<Part> {
        let Some(dirs) = self.offline_dirs.get(&broker) else {
            return Vec::new();
        };
        let mut parts: Vec<Part> = dirs.iter().copied().collect();
        parts.sort_unstable();
        parts
    }

    // --- Topics and assignments ----------------------------------------------------------------

    pub fn all_topics(&self) -> Vec<&str> {
        self.all_topics
            .iter()
            .map(|t| self.topic_name(*t))
            .collect()
    }

    pub fn has_topic(&self, name: &str) -> bool {
        self.topic_idx(name)
            .is_some_and(|t| self.all_topics.contains(&t))
    }

    pub fn add_topic(&mut self, name: &str, topic_id: Option<String>) {
        let t = self.intern_topic(name);
        self.all_topics.insert(t);
        if topic_id.is_some() {
            self.topics[t as usize].topic_id = topic_id;
        }
    }

    pub fn topic_id(&self, t: TopicIdx) -> Option<&str> {
        self.topics[t as usize].topic_id.as_deref()
    }

    pub fn topic_ids(&self) -> Vec<(&str, &str)> {
        self.topics
            .iter()
            .filter_map(|t| t.topic_id.as_deref().map(|id| (&*t.name, id)))
            .collect()
    }

    pub fn remove_topic(&mut self, name: &str) {
        let Some(t) = self.topic_idx(name) else {
            return;
        };
        if !self.to_be_deleted.contains(&t) {
            self.clean_imbalance(t);
        }
        self.to_be_deleted.shift_remove(&t);
        self.deletion_started.shift_remove(&t);
        self.all_topics.shift_remove(&t);
        self.topics[t as usize].topic_id = None;
        self.assigned_topics.shift_remove(&t);
        self.replica_index.take();
        if let AssignmentJournal::Tracking(_) = self.assignment_changes {
            self.assignment_changes = AssignmentJournal::Lost;
        }
        self.topics[t as usize].unordered = false;
        for p in std::mem::take(&mut self.topics[t as usize].assigned) {
            let i = p as usize;
            self.has_assignment[i] = false;
            self.move_replica_states(p, &[]);
            for b in std::mem::take(&mut self.replicas[i]) {
                self.replicas_per_broker.add(b, -1);
            }
            self.moving.remove(&p);
            self.set_leader(i, NO_LEADERSHIP);
        }
    }

    pub fn update_assignment(&mut self, p: Part, assignment: &ReplicaAssignment) {
        if let AssignmentJournal::Tracking(changes) = &mut self.assignment_changes {
            if changes.len() < ASSIGNMENT_JOURNAL_LIMIT {
                changes.push(p);
            } else {
                self.assignment_changes = AssignmentJournal::Lost;
            }
        }
        let i = p as usize;
        let fresh = !self.has_assignment[i];
        let same = self.replica_index.get().is_none() || self.replicas[i] == assignment.replicas;
        self.tracking_imbalance(p, |ctx| {
            if !ctx.has_assignment[i] {
                ctx.has_assignment[i] = true;
                let t = ctx.p_topic[i];
                let topic = &mut ctx.topics[t as usize];
                topic.unordered |= topic.assigned.last().is_some_and(|last| *last > p);
                topic.assigned.push(p);
                ctx.assigned_topics.insert(t);
            }
            for &b in &ctx.replicas[i] {
                ctx.replicas_per_broker.add(b, -1);
            }
            for &b in &assignment.replicas {
                ctx.replicas_per_broker.add(b, 1);
            }
            ctx.move_replica_states(p, &assignment.replicas);
            ctx.replicas[i].clone_from(&assignment.replicas);
            if assignment.adding.is_empty() && assignment.removing.is_empty() {
                ctx.moving.remove(&p);
            } else {
                ctx.moving.insert(
                    p,
                    Moving {
                        adding: assignment.adding.clone(),
                        removing: assignment.removing.clone(),
                    },
                );
            }
        });
        if let Some(index) = self.replica_index.get_mut() {
            // A partition of the last topic assigned for the first time comes last in context order.
            if fresh && self.assigned_topics.last() == Some(&self.p_topic[i]) {
                index.add(p, &assignment.replicas);
            } else if fresh || !same {
                self.replica_index.take();
            }
        }
    }

    /// The partitions whose assignment changed since the previous call (in order, repeats
    /// included), or `None` when the previous call saw none of them: the first call, after more
    /// than `ASSIGNMENT_JOURNAL_LIMIT` changes, after a topic was removed or the context reset. A
    /// partition in the list is assigned; its position among its topic's partitions is the one
    /// its first assignment gave it.
    pub fn take_assignment_changes(&mut self) -> Option<Vec<Part>> {
        match std::mem::replace(
            &mut self.assignment_changes,
            AssignmentJournal::Tracking(Vec::new()),
        ) {
            AssignmentJournal::Tracking(changes) => Some(changes),
            AssignmentJournal::Off | AssignmentJournal::Lost => None,
        }
    }

    pub fn assignment(&self, p: Part) -> ReplicaAssignment {
        let i = p as usize;
        if !self.has_assignment[i] {
            return ReplicaAssignment::default();
        }
        let moving = self.moving.get(&p);
        ReplicaAssignment {
            replicas: self.replicas[i].clone(),
            adding: moving.map(|m| m.adding.clone()).unwrap_or_default(),
            removing: moving.map(|m| m.removing.clone()).unwrap_or_default(),
        }
    }

    /// RS without copying (empty when unassigned).
    pub fn replicas(&self, p: Part) -> &[BrokerId] {
        &self.replicas[p as usize]
    }

    pub fn target_replicas(&self, p: Part) -> Vec<BrokerId> {
        match self.moving.get(&p) {
            Some(m) => self
                .replicas(p)
                .iter()
                .copied()
                .filter(|r| !m.removing.contains(r))
                .collect(),
            None => self.replicas(p).to_vec(),
        }
    }

    /// AR and RR without copying (empty when the partition is not being reassigned).
    pub fn reassignment_lists(&self, p: Part) -> (&[BrokerId], &[BrokerId]) {
        match self.moving.get(&p) {
            Some(m) => (&m.adding, &m.removing),
            None => (&[], &[]),
        }
    }

    pub fn is_being_reassigned_assignment(&self, p: Part) -> bool {
        self.moving.contains_key(&p)
    }

    pub fn has_assignment(&self, p: Part) -> bool {
        self.has_assignment[p as usize]
    }

    pub fn partitions_for_topic(&self, name: &str) -> Vec<Part> {
        self.topic_idx(name)
            .map(|t| self.topics[t as usize].assigned.clone())
            .unwrap_or_default()
    }

    pub fn all_partitions(&self) -> Vec<Part> {
        let mut parts = Vec::with_capacity(self.p_topic.len());
        for t in &self.assigned_topics {
            parts.extend_from_slice(&self.topics[*t as usize].assigned);
        }
        parts
    }

    /// Every assigned partition in context order, with whether its topic is queued for deletion
    /// (looked up once per topic): the whole-cluster scans walk this without allocating.
    fn scan(&self) -> impl Iterator<Item = (Part, bool)> + '_ {
        self.scan_topics(self.assigned_topics.as_slice())
    }

    fn scan_topics<'a>(
        &'a self,
        topics: &'a TopicSlice,
    ) -> impl Iterator<Item = (Part, bool)> + 'a {
        topics.iter().flat_map(move |t| {
            let queued = self.to_be_deleted.contains(t);
            self.topics[*t as usize]
                .assigned
                .iter()
                .map(move |&p| (p, queued))
        })
    }

    /// The partitions of [`Self::scan`] that `keep` keeps, in context order, in a list made with
    /// room for `room`. A scan of a large cluster reads tens of megabytes that are rarely in
    /// cache, so above `PARALLEL_SCAN` partitions the second half of the topics is scanned on
    /// another thread.
    fn scan_filter(&self, room: usize, keep: impl Fn(Part, bool) -> bool + Sync) -> Vec<Part> {
        let topics = self.assigned_topics.as_slice();
        // Plain loops, topic by topic: the compiler makes a tight loop of each topic's partitions
        // where a flattened iterator costs several times the test itself.
        let collect = |topics: &TopicSlice, found: &mut Vec<Part>| {
            for t in topics {
                let queued = self.to_be_deleted.contains(t);
                for &p in &self.topics[*t as usize].assigned {
                    if keep(p, queued) {
                        found.push(p);
                    }
                }
            }
        };
        let mut found = Vec::with_capacity(room);
        if self.p_topic.len() < PARALLEL_SCAN || topics.len() < 2 {
            collect(topics, &mut found);
            return found;
        }
        let (first, second) = topics.split_at(topics.len() / 2);
        // Room for every partition of the second half, allocated here: memory the helper thread
        // allocated itself would be freed across threads after it has ended, which costs
        // mimalloc far more than the scan.
        let room = second
            .iter()
            .map(|t| self.topics[*t as usize].assigned.len())
            .sum();
        let mut found_second = Vec::with_capacity(room);
        std::thread::scope(|scope| {
            scope.spawn(|| collect(second, &mut found_second));
            collect(first, &mut found);
        });
        found.extend_from_slice(&found_second);
        found
    }

    pub fn partition_count(&self) -> usize {
        self.assigned_topics
            .iter()
            .map(|t| self.topics[*t as usize].assigned.len())
            .sum()
    }

    pub fn partitions_on_broker(&self, broker: BrokerId) -> Vec<Part> {
        self.replica_index().of(broker).to_vec()
    }

    /// The index of each broker's partitions, made now by one scan if there is none.
    fn replica_index(&self) -> &ReplicaIndex {
        self.replica_index.get_or_init(|| {
            // Each broker's list sized from the replica counts kept per broker: none regrown.
            let mut index = ReplicaIndex::default();
            for (b, count) in self.replicas_per_broker.counts() {
                index
                    .list(b)
                    .reserve_exact(usize::try_from(count).unwrap_or(0));
            }
            for t in &self.assigned_topics {
                for &p in &self.topics[*t as usize].assigned {
                    index.add(p, self.replicas(p));
                }
            }
            index
        })
    }

    /// Replicas hosted on the brokers, brokers ascending then context order.
    /// Broker by broker in id order, each broker's replicas in partition order: one pass.
    pub fn replicas_on_brokers(&self, brokers: &[BrokerId]) -> Vec<Replica> {
        let mut wanted = brokers.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        if let [broker] = wanted[..] {
            let parts = self.replica_index().of(broker);
            return parts.iter().map(|p| (*p, broker)).collect();
        }
        let mut by_broker: Vec<Vec<Replica>> = vec![Vec::new(); wanted.len()];
        for (p, _) in self.scan() {
            for &b in self.replicas(p) {
                if let Ok(at) = wanted.binary_search(&b) {
                    by_broker[at].push((p, b));
                }
            }
        }
        by_broker.concat()
    }

    pub fn replicas_for_partitions(&self, parts: &[Part]) -> Vec<Replica> {
        parts
            .iter()
            .flat_map(|p| self.replicas(*p).iter().map(move |b| (*p, *b)))
            .collect()
    }

    pub fn replicas_for_topic(&self, name: &str) -> Vec<Replica> {
        self.replicas_for_partitions(&self.partitions_for_topic(name))
    }

    pub fn online_and_offline_replicas(&self) -> (Vec<Replica>, Vec<Replica>) {
        self.scan()
            .flat_map(|(p, _)| self.replicas(p).iter().map(move |b| (p, *b)))
            .partition(|(p, b)| self.is_replica_online(*b, *p, false))
    }

    /// [`Self::online_and_offline_replicas`] without repeats, grouped by broker (ascending ids),
    /// each broker's in context order: the grouping the replica state machine makes of them,
    /// read from the replica index (made now if there is none). A failover's startup then neither
    /// lists its 3M replicas in context order nor regroups them, and the first broker failure
    /// after it finds the index made (30M replicas to list at 10M partitions).
    pub fn online_and_offline_replicas_by_broker(&self) -> (Vec<Replica>, Vec<Replica>) {
        let index = self.replica_index();
        let total = index.by_broker().map(|(_, parts)| parts.len()).sum();
        let (mut online, mut offline) = (Vec::with_capacity(total), Vec::new());
        for (b, parts) in index.by_broker() {
            for &p in parts {
                if self.is_replica_online(b, p, false) {
                    online.push((p, b));
                } else {
                    offline.push((p, b));
                }
            }
        }
        (online, offline)
    }

    pub fn partitions_being_reassigned(&self) -> Vec<Part> {
        self.being_reassigned.iter().copied().collect()
    }

    pub fn is_partition_being_reassigned(&self, p: Part) -> bool {
        self.being_reassigned.contains(&p)
    }

    pub fn add_partition_being_reassigned(&mut self, p: Part) {
        self.being_reassigned.insert(p);
    }

    pub fn remove_partition_being_reassigned(&mut self, p: Part) {
        self.being_reassigned.shift_remove(&p);
    }

    // --- Leadership ----------------------------------------------------------------------------

    pub fn put_leadership(&mut self, p: Part, lice: &LeaderIsrAndControllerEpoch) {
        self.tracking_imbalance(p, |ctx| {
            let i = p as usize;
            let lai = &lice.leader_and_isr;
            ctx.set_leader(i, lai.leader);
            ctx.leader_epoch[i] = lai.leader_epoch;
            ctx.partition_epoch[i] = lai.partition_epoch;
            ctx.controller_epoch[i] = lice.controller_epoch;
            ctx.recovery[i] = lai.recovery;
            ctx.isr[i].clone_from(&lai.isr);
        });
    }

    /// Every write of a cached leader goes through here, keeping the per-broker count.
    fn set_leader(&mut self, i: usize, leader: i32) {
        let old = std::mem::replace(&mut self.leader[i], leader);
        if old >= 0 {
            self.leaders_per_broker.add(old, -1);
        } else if old != NO_LEADERSHIP {
            self.negative_leaders -= 1;
        }
        if leader >= 0 {
            self.leaders_per_broker.add(leader, 1);
        } else if leader != NO_LEADERSHIP {
            self.negative_leaders += 1;
        }
    }

    pub fn has_leadership(&self, p: Part) -> bool {
        self.leader[p as usize] != NO_LEADERSHIP
    }

    pub fn leadership(&self, p: Part) -> Option<LeaderIsrAndControllerEpoch> {
        let i = p as usize;
        if self.leader[i] == NO_LEADERSHIP {
            return None;
        }
        Some(LeaderIsrAndControllerEpoch {
            leader_and_isr: LeaderAndIsr {
                leader: self.leader[i],
                isr: Replicas::from_slice(&self.isr[i]),
                leader_epoch: self.leader_epoch[i],
                partition_epoch: self.partition_epoch[i],
                recovery: self.recovery[i],
            },
            controller_epoch: self.controller_epoch[i],
        })
    }

    /// Whether Kafka 3.9's AlterPartition checks let `proposed` (a leader's RECOVERED state)
    /// through to the store against the cached state, without building that state: the same
    /// leader and partition epochs, a change (not the retry of a lost answer) and an ISR of
    /// `eligible` brokers (None: not checked). False also means "ask the full checks", which name
    /// the refusal.
    pub fn isr_change_writable(
        &self,
        p: Part,
        proposed: &LeaderAndIsr,
        eligible: Option<&HashSet<BrokerId>>,
    ) -> bool {
        let i = p as usize;
        self.leader[i] != NO_LEADERSHIP
            && proposed.recovery == LeaderRecoveryState::Recovered
            && proposed.leader_epoch == self.leader_epoch[i]
            && proposed.partition_epoch == self.partition_epoch[i]
            && (proposed.leader != self.leader[i]
                || proposed.isr[..] != self.isr[i][..]
                || self.recovery[i] != LeaderRecoveryState::Recovered)
            && eligible.is_none_or(|live| proposed.isr.iter().all(|b| live.contains(b)))
    }

    /// The cached leader (None without cached leadership).
    pub fn leader(&self, p: Part) -> Option<BrokerId> {
        let leader = self.leader[p as usize];
        (leader != NO_LEADERSHIP).then_some(leader)
    }

    pub fn leader_epoch(&self, p: Part) -> i32 {
        self.leader_epoch[p as usize]
    }

    pub fn isr(&self, p: Part) -> &[BrokerId] {
        &self.isr[p as usize]
    }

    pub fn clear_leadership(&mut self) {
        self.leader.iter_mut().for_each(|l| *l = NO_LEADERSHIP);
        self.leaders_per_broker = BrokerTally::default();
        self.negative_leaders = 0;
        self.imbalance_count = 0;
    }

    fn is_queued_for_deletion_part(&self, p: Part) -> bool {
        self.to_be_deleted.contains(&self.p_topic[p as usize])
    }

    /// Room for every partition up front (nearly all have a leader): a list regrown to 100K
    /// partitions at each broker's startup took fresh pages at every step.
    pub fn partitions_with_leaders(&self) -> Vec<Part> {
        self.scan_filter(self.partition_count(), |p, queued| {
            !queued && self.has_leadership(p)
        })
    }

    pub fn partitions_with_offline_leader(&self) -> Vec<Part> {
        self.offline_leader_partitions_indexed()
            .unwrap_or_else(|| self.offline_leader_partitions_scanned())
    }

    fn offline_leader_partitions_scanned(&self) -> Vec<Part> {
        self.scan_filter(0, |p, queued| {
            !queued
                && self
                    .leader(p)
                    .is_some_and(|l| !self.is_replica_online(l, p, false))
        })
    }

    /// [`Self::partitions_with_offline_leader`] from the leader counts and the replica index,
    /// when they tell: no log directory offline, no negative leader, and one offline broker
    /// leading partitions, all of which host a replica on it (a broker failure's case). None
    /// when the whole cluster must be scanned.
    fn offline_leader_partitions_indexed(&self) -> Option<Vec<Part>> {
        if !self.offline_dirs.is_empty() || self.negative_leaders != 0 {
            return None;
        }
        let mut offline = self
            .leaders_per_broker
            .counts()
            .into_iter()
            .filter(|(b, _)| !self.is_live(*b));
        let Some((broker, _)) = offline.next() else {
            return Some(Vec::new());
        };
        if offline.next().is_some() {
            return None;
        }
        let found = self.partitions_led_indexed(broker)?;
        if self.to_be_deleted.is_empty() {
            return Some(found);
        }
        Some(
            found
                .into_iter()
                .filter(|p| !self.is_queued_for_deletion_part(*p))
                .collect(),
        )
    }

    /// The partitions `broker` leads in context order, from the replica index, when they are
    /// all there (as many as its leader count); None when some of them are unassigned or led
    /// from outside their replicas, which only a scan finds.
    fn partitions_led_indexed(&self, broker: BrokerId) -> Option<Vec<Part>> {
        let found: Vec<Part> = (self.replica_index().of(broker).iter().copied())
            .filter(|p| self.leader[*p as usize] == broker)
            .collect();
        (i64::try_from(found.len()).ok() == Some(self.leaders_per_broker.get(broker)))
            .then_some(found)
    }

    /// The replicated partitions `broker` leads (topics not queued for deletion): what a
    /// controlled shutdown still waits on, read from the replica index when it holds them all.
    pub fn partition_leaders_on_broker(&self, broker: BrokerId) -> Vec<Part> {
        let kept = |p: Part, queued: bool| {
            !queued && self.leader(p) == Some(broker) && self.replicas(p).len() > 1
        };
        match self.partitions_led_indexed(broker) {
            Some(led) => (led.into_iter())
                .filter(|p| kept(*p, self.is_queued_for_deletion_part(*p)))
                .collect(),
            None => self.scan_filter(0, kept),
        }
    }

    /// Partitions led by each broker (every cached leadership, assigned or not), ascending ids,
    /// brokers leading none left out.
    pub fn leader_counts(&self) -> Vec<(BrokerId, i64)> {
        self.leaders_per_broker.counts()
    }

    /// Partitions each broker hosts a replica of (assignments), ascending ids, brokers hosting
    /// none left out.
    pub fn replica_counts(&self) -> Vec<(BrokerId, i64)> {
        self.replicas_per_broker.counts()
    }

    // --- States --------------------------------------------------------------------------------

    pub fn partition_state(&self, p: Part) -> PartitionState {
        PartitionState::from_id(self.p_state[p as usize]).unwrap_or(PartitionState::NonExistent)
    }

    pub fn has_partition_state(&self, p: Part) -> bool {
        self.p_state[p as usize] != NO_STATE
    }

    pub fn put_partition_state(&mut self, p: Part, state: PartitionState) {
        let current = self.partition_state(p);
        self.p_state[p as usize] = state as u8;
        match (awaits_online(current), awaits_online(state)) {
            (false, true) => {
                self.awaiting_count += 1;
                self.awaiting.push(p);
                if self.awaiting.len() > 2 * self.awaiting_count + 1024 {
                    let p_state = &self.p_state;
                    self.awaiting
                        .retain(|p| awaits_online_id(p_state[*p as usize]));
                    self.awaiting.sort_unstable();
                    self.awaiting.dedup();
                }
            }
            (true, false) => {
                self.awaiting_count -= 1;
                if self.awaiting_count == 0 {
                    self.awaiting = Vec::new();
                }
            }
            _ => {}
        }
        if !self.deletion_started.contains(&self.p_topic[p as usize]) {
            if current != PartitionState::Offline && state == PartitionState::Offline {
                self.offline_partition_count += 1;
            } else if current == PartitionState::Offline && state != PartitionState::Offline {
                self.offline_partition_count -= 1;
            }
        }
    }

    pub fn partitions_in_states(
        &self,
        states: &[PartitionState],
        topic: Option<&str>,
    ) -> Vec<Part> {
        let in_states =
            |p: &Part| self.has_partition_state(*p) && states.contains(&self.partition_state(*p));
        match topic {
            Some(name) => self
                .partitions_for_topic(name)
                .into_iter()
                .filter(in_states)
                .collect(),
            None => self.scan().map(|(p, _)| p).filter(in_states).collect(),
        }
    }

    pub fn replica_state(&self, p: Part, broker: BrokerId) -> Option<ReplicaState> {
        match state_slot(&self.replicas[p as usize], broker) {
            Some(slot) => slot_state(self.r_states[p as usize], slot),
            None => self
                .r_states_unslotted
                .get(&p)?
                .iter()
                .find(|(b, _)| *b == broker)
                .map(|(_, s)| *s),
        }
    }

    pub fn put_replica_state(&mut self, p: Part, broker: BrokerId, state: ReplicaState) {
        match state_slot(&self.replicas[p as usize], broker) {
            Some(slot) => set_slot_state(&mut self.r_states[p as usize], slot, Some(state)),
            None => put_unslotted(&mut self.r_states_unslotted, p, broker, state),
        }
    }

    pub fn remove_replica_state(&mut self, p: Part, broker: BrokerId) {
        match state_slot(&self.replicas[p as usize], broker) {
            Some(slot) => set_slot_state(&mut self.r_states[p as usize], slot, None),
            None => {
                if let Some(states) = self.r_states_unslotted.get_mut(&p) {
                    states.retain(|(b, _)| *b != broker);
                    if states.is_empty() {
                        self.r_states_unslotted.remove(&p);
                    }
                }
            }
        }
    }

    /// Give the replica states of `p` the slots of its next replica list `next` (before it
    /// replaces the current one): a broker keeps its state wherever it moves, and a state whose
    /// broker has no slot in `next` is kept unslotted until it gets one again.
    fn move_replica_states(&mut self, p: Part, next: &[BrokerId]) {
        let i = p as usize;
        if self.r_states[i] == 0 && self.r_states_unslotted.is_empty() {
            return; // the load of a failover: no states yet
        }
        let mut states = self.r_states_unslotted.remove(&p).unwrap_or_default();
        let slotted = std::mem::take(&mut self.r_states[i]);
        for (slot, &broker) in self.replicas[i].iter().take(STATE_SLOTS).enumerate() {
            if let Some(state) = slot_state(slotted, slot) {
                states.push((broker, state));
            }
        }
        for (broker, state) in states {
            match state_slot(next, broker) {
                Some(slot) => set_slot_state(&mut self.r_states[i], slot, Some(state)),
                None => put_unslotted(&mut self.r_states_unslotted, p, broker, state),
            }
        }
    }

    pub fn replicas_in_state(&self, topic: &str, state: ReplicaState) -> Vec<Replica> {
        self.replicas_for_topic(topic)
            .into_iter()
            .filter(|(p, b)| self.replica_state(*p, *b) == Some(state))
            .collect()
    }

    pub fn are_all_replicas_in_state(&self, topic: &str, state: ReplicaState) -> bool {
        self.replicas_for_topic(topic)
            .into_iter()
            .all(|(p, b)| self.replica_state(p, b) == Some(state))
    }

    pub fn is_any_replica_in_state(&self, topic: &str, state: ReplicaState) -> bool {
        self.replicas_for_topic(topic)
            .into_iter()
            .any(|(p, b)| self.replica_state(p, b) == Some(state))
    }

    // --- Bulk views for the controller's hot paths --------------------------------------------------

    /// Replicas of topics queued for deletion, and the others (reference §6.6 step 1).
    pub fn split_replicas_by_topic_deletion(
        &self,
        replicas: &[Replica],
    ) -> (Vec<Replica>, Vec<Replica>) {
        replicas
            .iter()
            .partition(|(p, _)| self.is_queued_for_deletion_part(*p))
    }

    /// The partitions a controlled shutdown acts on (RF > 1, cached leadership, topic not queued for
    /// deletion): those the broker leads, and those it follows (reference §6.12 steps 5–6). Read
    /// from the broker's partitions in the replica index (in context order, as a scan finds them):
    /// a broker's 3K at 100K partitions rather than every partition.
    pub fn controlled_shutdown_partitions(&self, broker: BrokerId) -> (Vec<Part>, Vec<Part>) {
        self.replica_index()
            .of(broker)
            .iter()
            .copied()
            .filter(|&p| {
                self.replicas(p).len() > 1
                    && self.has_leadership(p)
                    && !self.is_queued_for_deletion_part(p)
            })
            .partition(|p| self.leader(*p) == Some(broker))
    }

    /// The partitions led by someone other than their preferred replica (head of the assignment).
    pub fn partitions_not_led_by_preferred(&self, parts: &[Part]) -> Vec<Part> {
        parts
            .iter()
            .copied()
            .filter(|p| {
                let replicas = self.replicas(*p);
                replicas.is_empty() || self.leader(*p) != Some(replicas[0])
            })
            .collect()
    }

    /// The auto leader rebalance check (reference §6.10): for each preferred broker, in order, whose
    /// share of partitions led elsewhere exceeds `ratio`, the partitions whose preferred replica could
    /// lead now (none while any reassignment runs, when `reassignments_block`).
    pub fn auto_rebalance_candidates(
        &self,
        ratio: f64,
        reassignments_block: bool,
    ) -> Vec<(BrokerId, Vec<Part>)> {
        let mut groups: BTreeMap<BrokerId, (usize, Vec<Part>)> = BTreeMap::new();
        for (p, queued) in self.scan() {
            let Some(&preferred) = self.replicas(p).first() else {
                continue;
            };
            if queued {
                continue;
            }
            let group = groups.entry(preferred).or_default();
            group.0 += 1;
            if self.leader(p).is_some_and(|l| l != preferred) {
                group.1.push(p);
            }
        }
        let blocked = reassignments_block && !self.being_reassigned.is_empty();
        groups
            .into_iter()
            .filter(|(_, (total, not_preferred))| {
                not_preferred.len() as f64 / *total as f64 > ratio
            })
            .map(|(broker, (_, not_preferred))| {
                let candidates = if blocked {
                    Vec::new()
                } else {
                    not_preferred
                        .into_iter()
                        .filter(|p| {
                            self.all_topics.contains(&self.p_topic[*p as usize])
                                && self.is_replica_online(broker, *p, false)
                                && self.isr(*p).contains(&broker)
                        })
                        .collect()
                };
                (broker, candidates)
            })
            .collect()
    }

    // --- State-machine startup (reference §3.4, §4.4) --------------------------------------------

    /// Partition states from cached leadership: New without it, Online if the leader is online.
    pub fn initialize_partition_states(&mut self) {
        for p in self.all_partitions() {
            let state = match self.leader(p) {
                None => PartitionState::New,
                Some(leader) if self.is_replica_online(leader, p, false) => PartitionState::Online,
                Some(_) => PartitionState::Offline,
            };
            self.put_partition_state(p, state);
        }
    }

    /// Partitions of topics not queued for deletion that have an online replica and yet no
    /// leader, a state other than Online, or an ISR without one of their online replicas (at most
    /// `limit`): what a cluster still has to converge on.
    pub fn unconverged_partitions(&self, limit: usize) -> Vec<Part> {
        let mut found = Vec::new();
        // Plain loops topic by topic and one pass over each partition's replicas: a converged
        // cluster (every check of a simulation's stability) is scanned whole.
        for t in self.assigned_topics.as_slice() {
            if self.to_be_deleted.contains(t) {
                continue;
            }
            for &p in &self.topics[*t as usize].assigned {
                if !self.is_converged(p) {
                    found.push(p);
                    if found.len() >= limit {
                        return found;
                    }
                }
            }
        }
        found
    }

    /// Whether `p` has no online replica, or a leader, the Online state and every online
    /// replica in its ISR.
    fn is_converged(&self, p: Part) -> bool {
        let (mut any_online, mut all_in_isr) = (false, true);
        let isr = self.isr(p);
        for &r in self.replicas(p) {
            if self.is_replica_online(r, p, false) {
                any_online = true;
                all_in_isr &= isr.contains(&r);
            }
        }
        !any_online
            || (all_in_isr
                && self.has_leadership(p)
                && self.partition_state(p) == PartitionState::Online)
    }

    /// New and Offline partitions of topics not queued for deletion (of one topic, if given).
    pub fn partitions_to_trigger_online(&self, topic: Option<&str>) -> Vec<Part> {
        let wanted = |p: &Part| {
            matches!(
                self.partition_state(*p),
                PartitionState::Offline | PartitionState::New
            )
        };
        match topic {
            Some(name) if self.is_topic_queued_up_for_deletion(name) => Vec::new(),
            Some(name) => self
                .partitions_for_topic(name)
                .into_iter()
                .filter(wanted)
                .collect(),
            None => self
                .awaiting_online_indexed()
                .unwrap_or_else(|| self.scan_filter(0, |p, queued| !queued && wanted(&p))),
        }
    }

    /// [`Self::partitions_to_trigger_online`] of every topic from the partitions known to be in
    /// those states, when they are few (a broker failure's thousands among a million). None
    /// when the whole cluster must be scanned.
    fn awaiting_online_indexed(&self) -> Option<Vec<Part>> {
        if self.awaiting.len() > self.p_topic.len() / 8 {
            return None;
        }
        let mut found: Vec<Part> = (self.awaiting.iter().copied())
            .filter(|p| {
                awaits_online_id(self.p_state[*p as usize])
                    && self.has_assignment(*p)
                    && !self.is_queued_for_deletion_part(*p)
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        self.sort_in_context_order(&mut found);
        Some(found)
    }

    /// Distinct assigned partitions into context order: by their topic's place, then by their
    /// own within the topic (their index's unless the topic is `unordered`).
    fn sort_in_context_order(&self, parts: &mut [Part]) {
        let mut places: HashMap<Part, usize> = HashMap::default();
        for t in parts.iter().map(|p| self.p_topic[*p as usize]) {
            let topic = &self.topics[t as usize];
            if topic.unordered && !places.contains_key(&topic.assigned[0]) {
                places.extend(topic.assigned.iter().enumerate().map(|(at, p)| (*p, at)));
            }
        }
        parts.sort_by_cached_key(|p| {
            let t = self.p_topic[*p as usize];
            let within = match places.get(p) {
                Some(at) => *at,
                None => *p as usize,
            };
            (self.assigned_topics.get_index_of(&t), within)
        });
    }

    /// Replicas online where their broker is, else ReplicaDeletionIneligible (so that a topic being
    /// deleted is not stuck in ReplicaDeletionStarted after a failover).
    /// The replicas are read in place, not listed first (3M pairs at 1M partitions).
    pub fn initialize_replica_states(&mut self) {
        for p in self.all_partitions() {
            for k in 0..self.replicas[p as usize].len() {
                let b = self.replicas[p as usize][k];
                let state = if self.is_replica_online(b, p, false) {
                    ReplicaState::Online
                } else {
                    ReplicaState::DeletionIneligible
                };
                self.put_replica_state(p, b, state);
            }
        }
    }

    // --- Topic deletion ------------------------------------------------------------------------

    fn names(&self, set: &IndexSet<TopicIdx>) -> Vec<&str> {
        set.iter().map(|t| self.topic_name(*t)).collect()
    }

    pub fn topics_to_be_deleted(&self) -> Vec<&str> {
        self.names(&self.to_be_deleted)
    }

    pub fn topics_with_deletion_started(&self) -> Vec<&str> {
        self.names(&self.deletion_started)
    }

    pub fn topics_ineligible_for_deletion(&self) -> Vec<&str> {
        self.names(&self.ineligible)
    }

    pub fn is_topic_queued_up_for_deletion(&self, topic: &str) -> bool {
        self.topic_idx(topic)
            .is_some_and(|t| self.to_be_deleted.contains(&t))
    }

    pub fn is_topic_idx_queued_up_for_deletion(&self, t: TopicIdx) -> bool {
        self.to_be_deleted.contains(&t)
    }

    pub fn queue_topic_deletion(&mut self, topics: &[&str]) {
        for name in topics {
            let t = self.intern_topic(name);
            if !self.to_be_deleted.contains(&t) {
                self.clean_imbalance(t);
                self.to_be_deleted.insert(t);
            }
        }
    }

    pub fn begin_topic_deletion(&mut self, topics: &[&str]) {
        for name in topics {
            let t = self.intern_topic(name);
            self.deletion_started.insert(t);
        }
    }

    pub fn mark_topics_ineligible_for_deletion(&mut self, topics: &[&str]) {
        for name in topics {
            let t = self.intern_topic(name);
            self.ineligible.insert(t);
        }
    }

    pub fn clear_topics_ineligible_for_deletion(&mut self, topics: &[&str]) {
        for name in topics {
            if let Some(t) = self.topic_idx(name) {
                self.ineligible.shift_remove(&t);
            }
        }
    }

    /// Bytes held per partition by the per-partition arrays (the memory target counts these).
    pub fn heap_bytes(&self) -> usize {
        fn spilled(lists: &[Replicas]) -> usize {
            lists
                .iter()
                .filter(|l| l.spilled())
                .map(|l| l.capacity() * 4)
                .sum()
        }
        let n = self.p_topic.capacity();
        n * (4 + 4 + 1 + 4 + 4 + 4 + 4 + 1 + 1)
            + self.replicas.capacity() * std::mem::size_of::<Replicas>()
            + self.isr.capacity() * std::mem::size_of::<Replicas>()
            + self.r_states.capacity() * 4
            + self.r_states_unslotted.capacity()
                * std::mem::size_of::<(Part, SmallVec<[(BrokerId, ReplicaState); 2]>)>()
            + spilled(&self.replicas)
            + spilled(&self.isr)
            + self
                .topics
                .iter()
                .map(|t| t.by_id.capacity() * 4 + t.assigned.capacity() * 4)
                .sum::<usize>()
            + self.replica_index.get().map_or(0, ReplicaIndex::heap_bytes)
            + self.awaiting.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ra(replicas: &[BrokerId]) -> ReplicaAssignment {
        ReplicaAssignment {
            replicas: replicas.into(),
            ..ReplicaAssignment::default()
        }
    }

    fn lice(leader: BrokerId, isr: &[BrokerId]) -> LeaderIsrAndControllerEpoch {
        LeaderIsrAndControllerEpoch {
            leader_and_isr: LeaderAndIsr::new(leader, isr.into()),
            controller_epoch: 1,
        }
    }

    /// Only a proposal at the cached epochs that changes a RECOVERED state, with an ISR of
    /// eligible brokers, is writable without the full checks.
    #[test]
    fn isr_change_writable_only_for_a_plain_change() {
        let mut ctx = Context::new();
        let p = ctx.intern_part("t", 0);
        let proposal = |leader, isr: &[BrokerId], leader_epoch, partition_epoch| LeaderAndIsr {
            leader_epoch,
            partition_epoch,
            ..LeaderAndIsr::new(leader, isr.into())
        };
        assert!(!ctx.isr_change_writable(p, &proposal(1, &[1], 0, 0), None)); // no leadership
        let mut cached = lice(1, &[1, 2]);
        cached.leader_and_isr.leader_epoch = 4;
        cached.leader_and_isr.partition_epoch = 7;
        ctx.put_leadership(p, &cached);
        let live: HashSet<BrokerId> = [1, 2, 3].into_iter().collect();
        let writable =
            |proposed: &LeaderAndIsr, eligible| ctx.isr_change_writable(p, proposed, eligible);
        assert!(writable(&proposal(1, &[1, 2, 3], 4, 7), Some(&live)));
        assert!(writable(&proposal(1, &[1], 4, 7), None));
        assert!(!writable(&proposal(1, &[1, 2], 4, 7), None)); // a retry: answered from the cache
        assert!(!writable(&proposal(1, &[1, 4], 4, 7), Some(&live))); // 4 is not eligible
        assert!(writable(&proposal(1, &[1, 4], 4, 7), None));
        for (leader_epoch, partition_epoch) in [(3, 7), (5, 7), (4, 6), (4, 8)] {
            assert!(!writable(
                &proposal(1, &[1], leader_epoch, partition_epoch),
                None
            ));
        }
        let recovering = LeaderAndIsr {
            recovery: LeaderRecoveryState::Recovering,
            ..proposal(1, &[1], 4, 7)
        };
        assert!(!writable(&recovering, None));
        cached.leader_and_isr.recovery = LeaderRecoveryState::Recovering;
        ctx.put_leadership(p, &cached);
        // Leaving recovery with the same leader and ISR is a change, not a retry.
        assert!(ctx.isr_change_writable(p, &proposal(1, &[1, 2], 4, 7), None));
    }

    /// Above `PARALLEL_SCAN` partitions the scans split the topics over two threads; their
    /// results are the sequential ones, in context order (topics given out of name order, one
    /// queued for deletion, leaders on and off the scanned broker).
    #[test]
    fn parallel_scans_equal_sequential_ones() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 1), (2, 1), (3, 1)]);
        let per_topic = 1_000;
        for t in (0..(PARALLEL_SCAN / per_topic + 7)).rev() {
            for id in 0..per_topic {
                let p = ctx.intern_part(&format!("t{t}"), id as i32);
                let first = (t + id) as BrokerId % 4;
                ctx.update_assignment(p, &ra(&[first, (first + 1) % 4]));
                ctx.put_leadership(p, &lice(first, &[first]));
            }
        }
        ctx.queue_topic_deletion(&["t3"]);
        assert!(ctx.p_topic.len() >= PARALLEL_SCAN);
        let sequential = |keep: &dyn Fn(Part, bool) -> bool| -> Vec<Part> {
            ctx.scan()
                .filter(|&(p, q)| keep(p, q))
                .map(|(p, _)| p)
                .collect()
        };
        assert_eq!(
            ctx.partitions_on_broker(2),
            sequential(&|p, _| ctx.replicas(p).contains(&2))
        );
        let offline = ctx.partitions_with_offline_leader();
        assert!(!offline.is_empty());
        assert_eq!(offline, sequential(&|p, q| !q && ctx.leader(p) == Some(0)));
        assert_eq!(
            ctx.partitions_with_leaders().len(),
            ctx.p_topic.len() - per_topic
        );
    }

    /// A partition is unconverged with an online replica and no leader, a state other than
    /// Online or an online replica out of its ISR; one without online replicas, or of a topic
    /// queued for deletion, never is. Found in context order, at most `limit`.
    #[test]
    fn unconverged_partitions_are_those_with_an_online_replica_left_out() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 0), (2, 0), (3, 0)]);
        ctx.add_shutting_down_broker(3);
        // (topic, partition, replicas, leader and ISR, state)
        type Case = (
            &'static str,
            i32,
            &'static [BrokerId],
            Option<(BrokerId, &'static [BrokerId])>,
            PartitionState,
        );
        let cases: [Case; 8] = [
            ("b", 0, &[1, 2], Some((1, &[1, 2])), PartitionState::Online), // converged
            ("b", 1, &[1, 2], None, PartitionState::Online),               // no leader
            ("a", 0, &[1, 2], Some((1, &[1])), PartitionState::Online),    // 2 out of the ISR
            ("a", 1, &[1, 3], Some((1, &[1])), PartitionState::Online),    // 3 shutting down
            ("a", 2, &[5, 6], None, PartitionState::Offline),              // no online replica
            ("a", 3, &[2, 1], Some((2, &[2, 1])), PartitionState::Offline), // not Online
            ("c", 0, &[1], None, PartitionState::New),                     // queued for deletion
            ("a", 4, &[2], Some((2, &[2])), PartitionState::Online),       // converged
        ];
        for (topic, id, replicas, leadership, state) in cases {
            let p = ctx.intern_part(topic, id);
            ctx.update_assignment(p, &ra(replicas));
            if let Some((leader, isr)) = leadership {
                ctx.put_leadership(p, &lice(leader, isr));
            }
            ctx.put_partition_state(p, state);
        }
        ctx.queue_topic_deletion(&["c"]);
        let unconverged = |ctx: &Context, limit: usize| -> Vec<String> {
            let parts = ctx.unconverged_partitions(limit);
            parts.into_iter().map(|p| ctx.tp_name(p)).collect()
        };
        assert_eq!(unconverged(&ctx, usize::MAX), ["b-1", "a-0", "a-3"]);
        assert_eq!(unconverged(&ctx, 1), ["b-1"]);
        ctx.remove_shutting_down_brokers(&[3]);
        assert_eq!(unconverged(&ctx, usize::MAX), ["b-1", "a-0", "a-1", "a-3"]);
    }

    /// A controlled shutdown's partitions, read from the replica index, are those a scan finds:
    /// replicated, led, of a topic not queued for deletion, in context order, split by leader;
    /// and so are a broker's led ones, also when one is led from outside its replicas (scanned).
    #[test]
    fn controlled_shutdown_partitions_are_the_scanned_ones() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 0), (2, 0), (3, 0)]);
        for t in ["c", "a", "b"] {
            for id in 0..40 {
                let p = ctx.intern_part(t, id);
                let first = id % 4;
                let replicas: Vec<BrokerId> = (0..=id % 3).map(|k| (first + k) % 4).collect();
                ctx.update_assignment(p, &ra(&replicas));
                if id % 5 != 0 {
                    ctx.put_leadership(
                        p,
                        &lice(replicas[id as usize / 3 % replicas.len()], &replicas),
                    );
                }
            }
        }
        ctx.queue_topic_deletion(&["a"]);
        for broker in 0..5 {
            let scanned: (Vec<Part>, Vec<Part>) = ctx
                .scan()
                .filter(|&(p, queued)| {
                    let replicas = ctx.replicas(p);
                    !queued
                        && replicas.len() > 1
                        && replicas.contains(&broker)
                        && ctx.has_leadership(p)
                })
                .map(|(p, _)| p)
                .partition(|p| ctx.leader(*p) == Some(broker));
            assert_eq!(
                ctx.controlled_shutdown_partitions(broker),
                scanned,
                "broker {broker}"
            );
            if broker < 4 {
                assert!(
                    !scanned.0.is_empty() && !scanned.1.is_empty(),
                    "broker {broker}"
                );
            }
        }
        let leaders_scanned = |ctx: &Context, broker: BrokerId| -> Vec<Part> {
            let replicated = |p: Part| ctx.replicas(p).len() > 1;
            (ctx.scan())
                .filter(|&(p, queued)| !queued && ctx.leader(p) == Some(broker) && replicated(p))
                .map(|(p, _)| p)
                .collect()
        };
        for broker in 0..5 {
            let scanned = leaders_scanned(&ctx, broker);
            assert_eq!(
                ctx.partition_leaders_on_broker(broker),
                scanned,
                "broker {broker}"
            );
        }
        let outside = ctx.part("c", 2).unwrap();
        assert!(!ctx.replicas(outside).contains(&1));
        ctx.put_leadership(outside, &lice(1, &[1]));
        assert!(ctx.partitions_led_indexed(1).is_none());
        assert!(leaders_scanned(&ctx, 1).contains(&outside));
        assert_eq!(ctx.partition_leaders_on_broker(1), leaders_scanned(&ctx, 1));
    }

    /// Each broker's partitions as a scan of the context finds them, in context order.
    fn scanned_on_broker(ctx: &Context, broker: BrokerId) -> Vec<Part> {
        let all = ctx.all_partitions().into_iter();
        all.filter(|p| ctx.replicas(*p).contains(&broker)).collect()
    }

    #[test]
    fn replicas_by_broker_are_the_online_and_offline_replicas_grouped() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 0), (2, 0), (4, 0), (70_000, 0)]);
        ctx.add_shutting_down_broker(4);
        for (topic, id, replicas) in [
            ("b", 0, &[1, 2, 3][..]),
            ("a", 0, &[2, 3, 70_000]),
            ("a", 1, &[3, 4, 1, 1]),
            ("b", 1, &[-1, 2]),
        ] {
            let p = ctx.intern_part(topic, id);
            ctx.update_assignment(p, &ra(replicas));
        }
        ctx.add_replicas_on_offline_dirs(2, &[ctx.part("a", 0).unwrap()]);
        // Stably by broker without repeats: the grouping the replica state machine makes.
        let grouped = |mut replicas: Vec<Replica>| {
            replicas.sort_by_key(|(_, b)| *b);
            replicas.dedup();
            replicas
        };
        let (online, offline) = ctx.online_and_offline_replicas();
        let expected = (grouped(online), grouped(offline));
        assert_eq!(ctx.online_and_offline_replicas_by_broker(), expected);
        assert_eq!(
            expected.0.len() + expected.1.len(),
            11,
            "the repeat dropped"
        );
        assert!(ctx.replica_index.get().is_some(), "the index is made");
    }

    #[test]
    fn replica_index_follows_assignment_changes() {
        let mut ctx = Context::new();
        let check = |ctx: &Context, step: &str| {
            for b in -1..6 {
                let scanned = scanned_on_broker(ctx, b);
                assert_eq!(ctx.partitions_on_broker(b), scanned, "broker {b}, {step}");
                let on: Vec<Replica> = scanned.iter().map(|p| (*p, b)).collect();
                assert_eq!(ctx.replicas_on_brokers(&[b, b]), on, "broker {b}, {step}");
            }
        };
        let assign = |ctx: &mut Context, topic: &str, id: i32, replicas: &[BrokerId]| {
            let p = ctx.intern_part(topic, id);
            ctx.update_assignment(p, &ra(replicas));
        };
        assign(&mut ctx, "b", 0, &[1, 2, 3]);
        assign(&mut ctx, "a", 0, &[2, 3, 4]);
        check(&ctx, "built");
        assign(&mut ctx, "a", 1, &[3, 4, 1]);
        assign(&mut ctx, "c", 0, &[4, 1, 1]);
        check(&ctx, "partitions appended last, a repeated replica");
        assert!(ctx.replica_index.get().is_some(), "kept while appending");
        assign(&mut ctx, "b", 1, &[5, 1]);
        check(&ctx, "a partition added to an earlier topic");
        assign(&mut ctx, "a", 0, &[2, 3, 4]);
        assert!(ctx.replica_index.get().is_some(), "kept when unchanged");
        assign(&mut ctx, "a", 0, &[5, 2]);
        check(&ctx, "a reassignment");
        ctx.remove_topic("b");
        check(&ctx, "a topic removed");
        assign(&mut ctx, "b", 1, &[1, 2]);
        check(&ctx, "a topic re-created");
        assert_eq!(
            ctx.partitions_on_broker(1),
            vec![
                ctx.part("a", 1).unwrap(),
                ctx.part("c", 0).unwrap(),
                ctx.part("b", 1).unwrap()
            ]
        );
        let heap = ctx.heap_bytes();
        ctx.reset();
        check(&ctx, "a reset");
        assert!(ctx.heap_bytes() < heap);
    }

    #[test]
    fn offline_leaders_from_the_index_are_the_scans() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 1), (2, 1), (3, 1), (4, 1)]);
        for t in ["x", "y"] {
            for id in 0..8 {
                let p = ctx.intern_part(t, id);
                let first = 1 + id % 4;
                let replicas = [first, 1 + first % 4];
                ctx.update_assignment(p, &ra(&replicas));
                ctx.put_leadership(p, &lice(first, &replicas));
            }
        }
        let x3 = ctx.part("x", 3).unwrap();
        let check = |ctx: &Context, indexed: bool, step: &str| {
            let scanned = ctx.offline_leader_partitions_scanned();
            assert_eq!(ctx.partitions_with_offline_leader(), scanned, "{step}");
            assert_eq!(
                ctx.offline_leader_partitions_indexed().is_some(),
                indexed,
                "{step}"
            );
        };
        check(&ctx, true, "all live");
        ctx.remove_live_brokers(&[2]);
        check(&ctx, true, "a broker failed");
        assert_eq!(ctx.partitions_with_offline_leader().len(), 4);
        ctx.queue_topic_deletion(&["y"]);
        check(&ctx, true, "a topic queued for deletion");
        ctx.add_shutting_down_broker(3);
        check(&ctx, false, "and a broker shutting down");
        ctx.remove_shutting_down_brokers(&[3]);
        ctx.put_leadership(x3, &lice(2, &[2]));
        check(&ctx, false, "a leader outside the replicas");
        ctx.put_leadership(x3, &lice(crate::model::NO_LEADER, &[4]));
        check(&ctx, false, "no leader");
        ctx.put_leadership(x3, &lice(4, &[4]));
        check(&ctx, true, "led again");
        ctx.add_replicas_on_offline_dirs(1, &[]);
        check(&ctx, true, "a LeaderAndIsr answer without a storage error");
        ctx.add_replicas_on_offline_dirs(1, &[x3]);
        check(&ctx, false, "an offline log directory");
        ctx.clear_replicas_on_offline_dirs(&[1]);
        ctx.add_live_brokers(&[(2, 2)]);
        check(&ctx, true, "the broker back");
        assert!(ctx.partitions_with_offline_leader().is_empty());
    }

    #[test]
    fn partitions_awaiting_online_from_the_journal_are_the_scans() {
        let mut ctx = Context::new();
        // Topic "b" gets its partitions out of index order; "c" is interned before "b".
        let c0 = ctx.intern_part("c", 0);
        let parts: Vec<Part> = (0..40)
            .map(|i| ctx.intern_part(["a", "b"][i % 2], 20 - i as i32 / 2))
            .collect();
        // Many more partitions online, so that the few awaiting are looked up, not scanned for.
        let others: Vec<Part> = (0..2000).map(|i| ctx.intern_part("z", i)).collect();
        let a = parts.iter().step_by(2);
        let b = parts.iter().skip(1).step_by(2).rev();
        let all: Vec<Part> = a.chain(b).chain(&others).chain([&c0]).copied().collect();
        for &p in &all {
            ctx.update_assignment(p, &ra(&[1]));
            ctx.put_partition_state(p, PartitionState::Online);
        }
        assert!(ctx.topics[ctx.topic_idx("b").unwrap() as usize].unordered);
        assert!(!ctx.topics[ctx.topic_idx("a").unwrap() as usize].unordered);
        let check = |ctx: &Context, step: &str| {
            let scanned = ctx.scan_filter(0, |p, queued| {
                !queued && awaits_online(ctx.partition_state(p))
            });
            if ctx.awaiting.len() < 200 {
                assert_eq!(
                    ctx.awaiting_online_indexed(),
                    Some(scanned.clone()),
                    "{step}"
                );
            }
            assert_eq!(ctx.partitions_to_trigger_online(None), scanned, "{step}");
        };
        check(&ctx, "none");
        for (k, &p) in parts.iter().enumerate().rev().step_by(3) {
            let state = [PartitionState::Offline, PartitionState::New][k % 2];
            ctx.put_partition_state(p, state);
        }
        ctx.put_partition_state(c0, PartitionState::New);
        check(&ctx, "some offline or new");
        assert!(!ctx.partitions_to_trigger_online(None).is_empty());
        ctx.put_partition_state(c0, PartitionState::Offline);
        ctx.put_partition_state(parts[1], PartitionState::Online);
        check(&ctx, "some online again");
        ctx.queue_topic_deletion(&["a"]);
        check(&ctx, "a topic queued for deletion");
        ctx.remove_topic("c");
        check(&ctx, "a topic removed");
        ctx.update_assignment(c0, &ra(&[2]));
        check(&ctx, "and re-created");
        for _ in 0..3000 {
            ctx.put_partition_state(parts[4], PartitionState::Online);
            ctx.put_partition_state(parts[4], PartitionState::Offline);
        }
        assert!(ctx.awaiting.len() < 2100, "repeats are dropped");
        check(&ctx, "one partition in and out many times");
        for &p in &all {
            ctx.put_partition_state(p, PartitionState::Online);
        }
        assert_eq!(ctx.awaiting.capacity(), 0);
        check(&ctx, "all online");
    }

    /// Reserved columns hold the partitions loaded and no more; reserving again in a filled
    /// context grows them as pushes would (a topic created at a time stays linear).
    #[test]
    fn reserved_columns_fit_the_load_and_then_grow_by_doubling() {
        let mut ctx = Context::new();
        ctx.reserve_partitions(1_500);
        for id in 0..1_500 {
            let p = ctx.intern_part(&format!("t{}", id / 4), id % 4);
            ctx.update_assignment(p, &ra(&[1, 2]));
        }
        let capacities = |ctx: &Context| {
            [
                ctx.p_topic.capacity(),
                ctx.p_id.capacity(),
                ctx.has_assignment.capacity(),
                ctx.replicas.capacity(),
                ctx.leader.capacity(),
                ctx.leader_epoch.capacity(),
                ctx.partition_epoch.capacity(),
                ctx.controller_epoch.capacity(),
                ctx.recovery.capacity(),
                ctx.isr.capacity(),
                ctx.p_state.capacity(),
                ctx.r_states.capacity(),
            ]
        };
        assert_eq!(capacities(&ctx), [1_500; 12]);
        ctx.reserve_partitions(4);
        assert_eq!(capacities(&ctx), [3_000; 12]);
    }

    #[test]
    fn assignment_journal_reports_changes_once_read() {
        let mut ctx = Context::new();
        let a = ctx.intern_part("t", 0);
        ctx.update_assignment(a, &ra(&[1, 2]));
        assert_eq!(
            ctx.take_assignment_changes(),
            None,
            "nothing kept before the first read"
        );
        let b = ctx.intern_part("t", 1);
        ctx.update_assignment(b, &ra(&[2, 3]));
        ctx.update_assignment(a, &ra(&[3]));
        assert_eq!(ctx.take_assignment_changes(), Some(vec![b, a]));
        assert_eq!(ctx.take_assignment_changes(), Some(vec![]));
        ctx.remove_topic("t");
        assert_eq!(
            ctx.take_assignment_changes(),
            None,
            "a removal is not a change list"
        );
        for _ in 0..=ASSIGNMENT_JOURNAL_LIMIT {
            ctx.update_assignment(a, &ra(&[1]));
        }
        assert_eq!(
            ctx.take_assignment_changes(),
            None,
            "too many changes to keep"
        );
        ctx.update_assignment(a, &ra(&[2]));
        ctx.reset();
        assert_eq!(
            ctx.take_assignment_changes(),
            None,
            "a reset context starts over"
        );
    }

    #[test]
    fn context_order_follows_first_assignment() {
        let mut ctx = Context::new();
        let b1 = ctx.intern_part("b", 1);
        let a0 = ctx.intern_part("a", 0);
        let b0 = ctx.intern_part("b", 0);
        for p in [b1, a0, b0] {
            ctx.update_assignment(p, &ra(&[1, 2]));
        }
        assert_eq!(ctx.all_partitions(), vec![b1, b0, a0]);
        ctx.remove_topic("b");
        assert_eq!(ctx.all_partitions(), vec![a0]);
        ctx.update_assignment(b0, &ra(&[1]));
        assert_eq!(
            ctx.all_partitions(),
            vec![a0, b0],
            "a re-created topic goes last"
        );
        assert_eq!(ctx.part("b", 0), Some(b0), "and keeps its partition index");
    }

    #[test]
    fn imbalance_and_offline_metrics() {
        let mut ctx = Context::new();
        let p = ctx.intern_part("t", 0);
        ctx.update_assignment(p, &ra(&[1, 2]));
        ctx.put_leadership(p, &lice(2, &[1, 2]));
        assert_eq!(ctx.preferred_replica_imbalance_count(), 1);
        ctx.put_leadership(p, &lice(1, &[1, 2]));
        assert_eq!(ctx.preferred_replica_imbalance_count(), 0);
        let moving = ReplicaAssignment {
            replicas: smallvec::smallvec![3, 1, 2],
            adding: smallvec::smallvec![3],
            removing: smallvec::smallvec![2],
        };
        ctx.update_assignment(p, &moving);
        assert_eq!(
            ctx.preferred_replica_imbalance_count(),
            0,
            "adding preferred replica not yet in the ISR"
        );
        ctx.put_leadership(p, &lice(1, &[1, 2, 3]));
        assert_eq!(ctx.preferred_replica_imbalance_count(), 1);
        ctx.queue_topic_deletion(&["t"]);
        assert_eq!(ctx.preferred_replica_imbalance_count(), 0);

        ctx.put_partition_state(p, PartitionState::Offline);
        assert_eq!(ctx.offline_partition_count(), 1);
        ctx.begin_topic_deletion(&["t"]);
        ctx.put_partition_state(p, PartitionState::NonExistent);
        assert_eq!(
            ctx.offline_partition_count(),
            1,
            "deletion-started topics are ignored"
        );
    }

    /// The per-broker counts kept as partitions change are the counts a scan finds.
    #[test]
    fn broker_counts_follow_assignments_and_leadership() {
        let scan = |ctx: &Context| {
            let mut leaders = BTreeMap::new();
            let mut replicas = BTreeMap::new();
            for p in 0..ctx.p_topic.len() as Part {
                if let Some(l) = ctx.leader(p).filter(|l| *l >= 0) {
                    *leaders.entry(l).or_insert(0) += 1;
                }
                for &b in ctx.replicas(p) {
                    *replicas.entry(b).or_insert(0) += 1;
                }
            }
            (
                leaders.into_iter().collect::<Vec<_>>(),
                replicas.into_iter().collect::<Vec<_>>(),
            )
        };
        let counts = |ctx: &Context| (ctx.leader_counts(), ctx.replica_counts());
        let mut ctx = Context::new();
        let far = DENSE_BROKER_IDS + 5;
        let a0 = ctx.intern_part("a", 0);
        let a1 = ctx.intern_part("a", 1);
        let b0 = ctx.intern_part("b", 0);
        ctx.update_assignment(a0, &ra(&[1, 2, far]));
        ctx.update_assignment(a1, &ra(&[2, -3]));
        ctx.update_assignment(b0, &ra(&[far, 1]));
        ctx.put_leadership(a0, &lice(far, &[far]));
        ctx.put_leadership(a1, &lice(2, &[2]));
        ctx.put_leadership(b0, &lice(-1, &[]));
        assert_eq!(counts(&ctx), scan(&ctx));
        assert_eq!(
            ctx.replica_counts(),
            vec![(-3, 1), (1, 2), (2, 2), (far, 2)]
        );
        ctx.put_leadership(a0, &lice(1, &[1]));
        ctx.update_assignment(a1, &ra(&[3]));
        assert_eq!(counts(&ctx), scan(&ctx));
        ctx.remove_topic("a");
        assert_eq!(counts(&ctx), scan(&ctx));
        assert_eq!(ctx.leader_counts(), vec![]);
        assert_eq!(ctx.replica_counts(), vec![(1, 1), (far, 1)]);
        ctx.update_assignment(a0, &ra(&[2]));
        ctx.put_leadership(a0, &lice(2, &[2]));
        ctx.clear_leadership();
        assert_eq!(counts(&ctx), scan(&ctx));
        ctx.reset();
        assert_eq!(counts(&ctx), (vec![], vec![]));
    }

    /// A replica's state follows its broker through reassignments, a topic's removal and its
    /// re-creation, whatever slot (or none) the broker has in the assignment.
    #[test]
    fn replica_states_follow_their_brokers() {
        use ReplicaState::*;
        let mut ctx = Context::new();
        let p = ctx.intern_part("t", 0);
        let states = |ctx: &Context| -> Vec<(BrokerId, Option<ReplicaState>)> {
            (0..=10).map(|b| (b, ctx.replica_state(p, b))).collect()
        };
        let expect = |pairs: &[(BrokerId, ReplicaState)]| -> Vec<(BrokerId, Option<ReplicaState>)> {
            (0..=10)
                .map(|b| (b, pairs.iter().find(|(x, _)| *x == b).map(|(_, s)| *s)))
                .collect()
        };
        ctx.put_replica_state(p, 4, DeletionIneligible); // no assignment yet: unslotted
        ctx.update_assignment(p, &ra(&[1, 2, 3]));
        ctx.put_replica_state(p, 1, Online);
        ctx.put_replica_state(p, 3, NonExistent);
        ctx.put_replica_state(p, 3, Offline);
        assert_eq!(
            states(&ctx),
            expect(&[(1, Online), (3, Offline), (4, DeletionIneligible)])
        );
        ctx.update_assignment(p, &ra(&[4, 3, 5]));
        assert_eq!(
            states(&ctx),
            expect(&[(1, Online), (3, Offline), (4, DeletionIneligible)])
        );
        ctx.remove_replica_state(p, 1);
        ctx.remove_replica_state(p, 4);
        ctx.put_replica_state(p, 5, New);
        assert_eq!(states(&ctx), expect(&[(3, Offline), (5, New)]));
        let nine: Vec<BrokerId> = (1..=9).collect();
        ctx.update_assignment(p, &ra(&nine));
        ctx.put_replica_state(p, 9, Online); // beyond the slots
        ctx.put_replica_state(p, 8, DeletionStarted);
        assert_eq!(
            states(&ctx),
            expect(&[(3, Offline), (5, New), (8, DeletionStarted), (9, Online)])
        );
        ctx.remove_topic("t");
        assert_eq!(
            states(&ctx),
            expect(&[(3, Offline), (5, New), (8, DeletionStarted), (9, Online)])
        );
        ctx.update_assignment(p, &ra(&[9, 5]));
        ctx.remove_replica_state(p, 8);
        ctx.remove_replica_state(p, 9);
        assert_eq!(states(&ctx), expect(&[(3, Offline), (5, New)]));
        ctx.remove_replica_state(p, 3);
        assert!(ctx.r_states_unslotted.is_empty(), "emptied entries go");
    }

    #[test]
    fn replica_online_rules() {
        let mut ctx = Context::new();
        let p = ctx.intern_part("t", 0);
        ctx.set_live_brokers(&[(1, 10), (2, 11)]);
        ctx.add_shutting_down_broker(2);
        assert!(ctx.is_replica_online(1, p, false));
        assert!(!ctx.is_replica_online(2, p, false));
        assert!(ctx.is_replica_online(2, p, true));
        ctx.add_replicas_on_offline_dirs(1, &[p]);
        assert!(!ctx.is_replica_online(1, p, true));
        assert_eq!(ctx.live_broker_ids(), vec![1]);
        assert_eq!(ctx.live_or_shutting_down_broker_ids(), vec![1, 2]);
    }
}
