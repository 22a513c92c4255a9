//! The simulated data plane of a whole cluster: every broker's replica table and the ledger (the
//! native twin of `kctl.broker.replica_manager.SimulatedReplicaManager` and `DataPlaneLedger`).
//!
//! One object holds every broker, because a follower reads its leader's replica directly; the
//! hot paths (a LeaderAndIsr request, a fetch round, an ISR check, an AlterPartition answer) are
//! one call each, not one per partition. Timers stay with the caller: each call reports, in the
//! order the Python reference would have made them, the timers it would have armed (`Effect`).
//! Partitions are numbered by the caller (`Pid`).

use smallvec::SmallVec;

use crate::hash::{HashMap, HashSet};
use crate::model::{BrokerId, Brokers};

/// A partition, numbered by the caller.
pub type Pid = u32;

/// A leader-epoch cache: `(leader epoch, start offset)` pairs.
pub type Epochs = Vec<(i32, i64)>;

/// A timer a call would have armed: the broker's fetcher, its ISR-expiration task, or its
/// AlterPartition flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    Fetch(BrokerId),
    WatchIsr(BrokerId),
    Flush(BrokerId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A log not hosted since start-up.
    Unhosted,
    Leader,
    Follower,
    Stopped,
    Offline,
}

/// The error a produce gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProduceError {
    None,
    UnknownTopicOrPartition,
    KafkaStorageError,
    NotLeaderOrFollower,
    /// The log would pass Kafka's largest offset (an int64).
    OffsetOverflow,
}

/// A leader's view of one follower (Kafka's remote Replica).
#[derive(Clone, Debug)]
pub struct Follower {
    pub id: BrokerId,
    pub leo: i64,
    pub caught_up_at: f64,
    pub last_fetch_leo: i64,
    pub last_fetch_at: f64,
    /// Its fetcher is running at this leader epoch.
    pub fetching: bool,
}

/// A leader's followers.
pub type Followers = SmallVec<[Follower; 2]>;

/// A local replica: its log (kept across restarts) and its current role.
#[derive(Clone, Debug)]
pub struct Replica {
    /// Tells this replica from one made after it was deleted (an answer names the one that proposed).
    pub serial: u64,
    pub role: Role,
    pub leo: i64,
    pub hw: i64,
    pub epochs: Epochs,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub controller_epoch: i32,
    pub isr: Brokers,
    pub replicas: Brokers,
    pub adding: Brokers,
    /// When leading, in the order of `replicas` (inline for RF 3: a fetch reads them without
    /// another cache miss).
    pub followers: Followers,
    /// When leading: the ISR proposed to the controller.
    pub pending: Option<Brokers>,
    /// When following: reconcile the log with the leader's first.
    pub truncate: bool,
    /// When following: it fetched since it became a follower (only then can the leader's entry
    /// for it say that it is fetching, and need telling when it stops).
    pub fetched: bool,
}

impl Replica {
    fn new(serial: u64) -> Self {
        Replica {
            serial,
            role: Role::Unhosted,
            leo: 0,
            hw: 0,
            epochs: Vec::new(),
            leader: -1,
            leader_epoch: -1,
            partition_epoch: 0,
            controller_epoch: 0,
            isr: Brokers::new(),
            replicas: Brokers::new(),
            adding: Brokers::new(),
            followers: Followers::new(),
            pending: None,
            truncate: false,
            fetched: false,
        }
    }

    fn truncate_to(&mut self, offset: i64) {
        if offset < self.leo {
            self.leo = offset;
            self.epochs.retain(|e| e.1 < offset);
        }
        self.hw = self.hw.min(self.leo);
    }

    fn follower(&mut self, id: BrokerId) -> Option<&mut Follower> {
        self.followers.iter_mut().find(|f| f.id == id)
    }
}

/// Length of the common prefix of two logs from their leader-epoch caches (KIP-101/279
/// truncation): records of one epoch are the same on every replica.
pub fn common_log_prefix(a: &[(i32, i64)], a_leo: i64, b: &[(i32, i64)], b_leo: i64) -> i64 {
    let end = a_leo.min(b_leo);
    for (ea, eb) in a.iter().zip(b) {
        if ea != eb {
            return end.min(ea.1).min(eb.1);
        }
    }
    let (longer, shorter) = if a.len() > b.len() {
        (a, b.len())
    } else {
        (b, a.len())
    };
    if longer.len() > shorter {
        end.min(longer[shorter].1)
    } else {
        end
    }
}

/// An insertion-ordered map with Python `dict` semantics (a key set again keeps its place, one
/// removed and set again goes last), whose removals cost O(1): removed slots are skipped and
/// compacted away once they outnumber the live ones.
#[derive(Clone, Debug)]
pub struct Ordered<K, V> {
    slots: Vec<Option<(K, V)>>,
    at: HashMap<K, usize>,
}

impl<K, V> Default for Ordered<K, V> {
    fn default() -> Self {
        Ordered {
            slots: Vec::new(),
            at: HashMap::default(),
        }
    }
}

impl<K: Copy + Eq + std::hash::Hash, V> Ordered<K, V> {
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.at.contains_key(key)
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        let i = *self.at.get(key)?;
        self.slots[i].as_ref().map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let i = *self.at.get(key)?;
        self.slots[i].as_mut().map(|(_, v)| v)
    }

    /// Set `key`'s value, in its place if it has one, else last.
    pub fn insert(&mut self, key: K, value: V) {
        match self.at.get(&key) {
            Some(&i) => self.slots[i] = Some((key, value)),
            None => {
                self.at.insert(key, self.slots.len());
                self.slots.push(Some((key, value)));
            }
        }
    }

    /// `key`'s value, made by `make` (and put last) when it has none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.at.get(&key) {
            Some(&i) => i,
            None => {
                self.at.insert(key, self.slots.len());
                self.slots.push(Some((key, make())));
                self.slots.len() - 1
            }
        };
        &mut self.slots[i].as_mut().expect("a live slot").1
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.at.remove(key)?;
        let (_, value) = self.slots[i].take().expect("a live slot");
        if self.at.is_empty() {
            self.slots.clear();
        } else if self.slots.len() > 2 * self.at.len() + 16 {
            self.compact();
        }
        Some(value)
    }

    fn compact(&mut self) {
        self.slots.retain(Option::is_some);
        for (i, slot) in self.slots.iter().enumerate() {
            let (key, _) = slot.as_ref().expect("a live slot");
            self.at.insert(*key, i);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|(k, v)| (k, v))
    }

    pub fn keys(&self) -> impl Iterator<Item = K> + '_ {
        self.slots.iter().flatten().map(|(k, _)| *k)
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.at.clear();
    }
}

/// What the ledger knows of a partition: its committed offset, its current leader's epoch and
/// maximal ISR.
#[derive(Clone, Debug)]
pub struct Record {
    pub committed: i64,
    pub leader_epoch: i32,
    pub isr: Brokers,
}

/// An I8 violation: a leader elected from the ISR lacks records below the high watermark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub pid: Pid,
    pub broker: BrokerId,
    pub leader_epoch: i32,
    pub log_end_offset: i64,
    pub committed: i64,
}

/// One proposal of an AlterPartition request in flight.
#[derive(Clone, Debug)]
struct Sent {
    pid: Pid,
    serial: u64,
    leader_epoch: i32,
    isr: Brokers,
}

/// A proposal as a request carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub pid: Pid,
    pub isr: Brokers,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub controller_epoch: i32,
}

/// The controller's answer for one proposal of a request answered without a top-level error.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The committed state: `(isr, leader epoch, partition epoch)`.
    Committed(Brokers, i32, i32),
    /// An error after which the leader keeps its proposal until the next LeaderAndIsr.
    AwaitLeaderAndIsr,
    /// Any other error: the proposal is dropped.
    Failed,
}

/// One LeaderAndIsr partition state.
#[derive(Clone, Debug)]
pub struct LeaderAndIsrRow {
    pub pid: Pid,
    pub controller_epoch: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Brokers,
    pub partition_epoch: i32,
    pub replicas: Brokers,
    pub adding: Brokers,
}

/// Kafka's `ReplicaManager` metrics of one broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metrics {
    pub leaders: usize,
    pub partitions: usize,
    pub under_replicated: usize,
    pub offline: usize,
    pub isr_expands: u64,
    pub isr_shrinks: u64,
}

/// One broker's replica manager.
#[derive(Debug, Default)]
pub struct Broker {
    id: BrokerId,
    running: bool,
    paused: bool,
    max_fetch_records: Option<i64>,
    replicas: Ordered<Pid, Replica>,
    /// Leader broker → the partitions to fetch from it.
    fetch_from: Ordered<BrokerId, Ordered<Pid, ()>>,
    /// Led partitions whose followers are not all in sync.
    isr_watch: Ordered<Pid, ()>,
    /// Led partition → the ISR to propose.
    alter_queue: Ordered<Pid, Brokers>,
    in_flight: Vec<Sent>,
    isr_expands: u64,
    isr_shrinks: u64,
}

/// The timers armed during one call, each once (arming an armed timer does nothing), in order.
#[derive(Debug, Default)]
struct Effects {
    list: Vec<Effect>,
    seen: HashSet<Effect>,
}

impl Effects {
    fn push(&mut self, effect: Effect) {
        if self.seen.insert(effect) {
            self.list.push(effect);
        }
    }
}

/// The ledger's per-partition records and I8 findings.
#[derive(Debug, Default)]
struct Ledger {
    /// By partition number (dense: the caller numbers partitions from 0).
    records: Vec<Option<Record>>,
    violations: Vec<Violation>,
    unclean_elections: u64,
    truncated_records: i64,
}

impl Ledger {
    fn leader_elected(
        &mut self,
        pid: Pid,
        broker: BrokerId,
        leader_epoch: i32,
        leo: i64,
        isr: &Brokers,
    ) {
        let at = pid as usize;
        if self.records.len() <= at {
            self.records.resize_with(at + 1, || None);
        }
        let record = self.records[at].get_or_insert_with(|| Record {
            committed: 0,
            leader_epoch: -1,
            isr: Brokers::new(),
        });
        if leader_epoch <= record.leader_epoch {
            return; // a late report of an older leadership
        }
        if record.leader_epoch < 0 || record.isr.contains(&broker) {
            if leo < record.committed {
                self.violations.push(Violation {
                    pid,
                    broker,
                    leader_epoch,
                    log_end_offset: leo,
                    committed: record.committed,
                });
            }
        } else {
            self.unclean_elections += 1;
            if leo < record.committed {
                self.truncated_records += record.committed - leo;
                record.committed = leo;
            }
        }
        record.leader_epoch = leader_epoch;
        record.isr = isr.clone();
    }

    fn isr_changed(&mut self, pid: Pid, leader_epoch: i32, isr: &Brokers) {
        if let Some(Some(record)) = self.records.get_mut(pid as usize) {
            if record.leader_epoch == leader_epoch {
                record.isr = isr.clone();
            }
        }
    }

    fn high_watermark_advanced(&mut self, pid: Pid, hw: i64) {
        if let Some(Some(record)) = self.records.get_mut(pid as usize) {
            record.committed = record.committed.max(hw);
        }
    }
}

/// A leader's high watermark advanced: its followers to wake, and the leadership they fetch.
struct Wake {
    pid: Pid,
    leader: BrokerId,
    leader_epoch: i32,
    followers: SmallVec<[BrokerId; 4]>,
}

impl Wake {
    fn of(r: &Replica, pid: Pid, leader: BrokerId) -> Self {
        Wake {
            pid,
            leader,
            leader_epoch: r.leader_epoch,
            followers: r.followers.iter().map(|f| f.id).collect(),
        }
    }
}

/// Every simulated broker of a cluster and the ledger.
#[derive(Debug, Default)]
pub struct DataPlane {
    brokers: Vec<Broker>,
    index: HashMap<BrokerId, usize>,
    ledger: Ledger,
    effects: Effects,
    serials: u64,
}

impl DataPlane {
    pub fn new() -> Self {
        Self::default()
    }

    fn at(&self, broker: BrokerId) -> Option<usize> {
        self.index.get(&broker).copied()
    }

    fn running_at(&self, broker: BrokerId) -> Option<usize> {
        self.at(broker).filter(|&i| self.brokers[i].running)
    }

    /// The timers armed since the last call, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        self.effects.seen.clear();
        std::mem::take(&mut self.effects.list)
    }

    pub fn is_running(&self, broker: BrokerId) -> bool {
        self.running_at(broker).is_some()
    }

    // --- The ledger ---------------------------------------------------------------------------

    pub fn violations(&self) -> &[Violation] {
        &self.ledger.violations
    }

    pub fn unclean_elections(&self) -> u64 {
        self.ledger.unclean_elections
    }

    pub fn truncated_records(&self) -> i64 {
        self.ledger.truncated_records
    }

    pub fn committed_offset(&self, pid: Pid) -> i64 {
        self.record(pid).map_or(0, |r| r.committed)
    }

    pub fn record(&self, pid: Pid) -> Option<&Record> {
        self.ledger.records.get(pid as usize)?.as_ref()
    }

    // --- Lifecycle ----------------------------------------------------------------------------

    /// The broker starts: replicas of a failed log directory are gone (it was replaced).
    /// `fresh`: a new replica manager, without the logs of another that ran as this broker.
    pub fn startup(&mut self, broker: BrokerId, max_fetch_records: Option<i64>, fresh: bool) {
        let i = match self.at(broker) {
            Some(i) if fresh => {
                self.brokers[i] = Broker {
                    id: broker,
                    ..Broker::default()
                };
                i
            }
            Some(i) => i,
            None => {
                self.index.insert(broker, self.brokers.len());
                self.brokers.push(Broker {
                    id: broker,
                    ..Broker::default()
                });
                self.brokers.len() - 1
            }
        };
        let b = &mut self.brokers[i];
        let offline: Vec<Pid> = (b.replicas.iter())
            .filter(|(_, r)| r.role == Role::Offline)
            .map(|(pid, _)| *pid)
            .collect();
        for pid in offline {
            b.replicas.remove(&pid);
        }
        b.max_fetch_records = max_fetch_records;
        b.running = true;
    }

    /// The broker stops: it leaves every role; answers to its requests are void.
    pub fn shutdown(&mut self, broker: BrokerId, now: f64) {
        let Some(i) = self.running_at(broker) else {
            return;
        };
        let pids: Vec<Pid> = self.brokers[i].replicas.keys().collect();
        for pid in pids {
            if self.replica(i, pid).role != Role::Offline {
                self.leave_role(i, pid, now);
                self.replica_mut(i, pid).role = Role::Unhosted;
            }
        }
        let b = &mut self.brokers[i];
        b.in_flight.clear();
        b.paused = false;
        b.running = false;
    }

    fn replica(&self, i: usize, pid: Pid) -> &Replica {
        self.brokers[i]
            .replicas
            .get(&pid)
            .expect("a hosted replica")
    }

    fn replica_mut(&mut self, i: usize, pid: Pid) -> &mut Replica {
        (self.brokers[i].replicas.get_mut(&pid)).expect("a hosted replica")
    }

    fn new_replica(&mut self) -> Replica {
        self.serials += 1;
        Replica::new(self.serials)
    }

    // --- Controller decisions -----------------------------------------------------------------

    /// Kafka's becomeLeaderOrFollower for the accepted states of one request.
    pub fn leader_and_isr(&mut self, broker: BrokerId, rows: Vec<LeaderAndIsrRow>, now: f64) {
        let Some(i) = self.running_at(broker) else {
            return;
        };
        for row in rows {
            let pid = row.pid;
            let role = match self.brokers[i].replicas.get(&pid) {
                Some(r) => r.role,
                None => {
                    let fresh = self.new_replica();
                    self.brokers[i].replicas.insert(pid, fresh);
                    Role::Unhosted
                }
            };
            // The other roles have nothing to leave.
            let previous = if role == Role::Leader || role == Role::Follower {
                self.leave_role(i, pid, now)
            } else {
                Followers::new()
            };
            let r = self.replica_mut(i, pid);
            r.leader = row.leader;
            r.leader_epoch = row.leader_epoch;
            r.partition_epoch = row.partition_epoch;
            r.controller_epoch = row.controller_epoch;
            r.isr = row.isr;
            r.replicas = row.replicas;
            r.adding = row.adding;
            if row.leader == broker {
                self.become_leader(i, pid, &previous, now);
            } else {
                // Kafka's makeFollower: fetch from the leader, reconciling the log first.
                r.role = Role::Follower;
                r.truncate = true;
                self.start_fetching(i, pid, row.leader);
            }
        }
    }

    /// StopReplica's accepted states: `(partition, leader epoch, delete)`; `deleted` says the
    /// topic is being deleted (the ledger forgets the partition).
    pub fn stop_replicas(&mut self, broker: BrokerId, rows: &[(Pid, bool, bool)], now: f64) {
        let Some(i) = self.running_at(broker) else {
            return;
        };
        for &(pid, delete, deleted) in rows {
            let role = self.brokers[i].replicas.get(&pid).map(|r| r.role);
            if role.is_some_and(|role| role != Role::Offline) {
                self.leave_role(i, pid, now);
                self.replica_mut(i, pid).role = Role::Stopped;
                if delete {
                    self.brokers[i].replicas.remove(&pid);
                }
            }
            if delete && deleted {
                if let Some(record) = self.ledger.records.get_mut(pid as usize) {
                    *record = None;
                }
            }
        }
    }

    /// The log directory holding these replicas failed.
    pub fn mark_offline(&mut self, broker: BrokerId, pids: &[Pid], now: f64) {
        let Some(i) = self.running_at(broker) else {
            return;
        };
        for &pid in pids {
            if !self.brokers[i].replicas.contains(&pid) {
                let fresh = self.new_replica();
                self.brokers[i].replicas.insert(pid, fresh);
            }
            self.leave_role(i, pid, now);
            self.replica_mut(i, pid).role = Role::Offline;
        }
    }

    /// Leave the replica's role: a follower stops fetching; a leader forgets its followers (which
    /// it returns), its proposal and its ISR watch.
    fn leave_role(&mut self, i: usize, pid: Pid, now: f64) -> Followers {
        let b = &mut self.brokers[i];
        let r = b.replicas.get_mut(&pid).expect("a hosted replica");
        match r.role {
            Role::Follower => {
                self.stop_fetching(i, pid, now);
                Followers::new()
            }
            Role::Leader => {
                r.pending = None;
                let followers = std::mem::take(&mut r.followers);
                b.alter_queue.remove(&pid);
                b.isr_watch.remove(&pid);
                followers
            }
            _ => Followers::new(),
        }
    }

    /// Kafka's makeLeader: the ISR's followers count as caught up now, others as never; a leader
    /// that keeps its role keeps what it knew of its followers' logs.
    fn become_leader(&mut self, i: usize, pid: Pid, previous: &[Follower], now: f64) {
        let me = self.brokers[i].id;
        let r = self.replica_mut(i, pid);
        r.role = Role::Leader;
        r.truncate = false;
        let leo = r.leo;
        let followers: Followers = (r.replicas.iter())
            .filter(|&&b| b != me)
            .map(|&b| Follower {
                id: b,
                leo: previous.iter().find(|p| p.id == b).map_or(-1, |p| p.leo),
                caught_up_at: if r.isr.contains(&b) { now } else { 0.0 },
                last_fetch_leo: leo,
                last_fetch_at: now,
                fetching: false,
            })
            .collect();
        let watch = !followers.is_empty();
        r.followers = followers;
        let (leader_epoch, isr) = (r.leader_epoch, r.isr.clone());
        self.ledger.leader_elected(pid, me, leader_epoch, leo, &isr);
        if watch {
            self.watch(i, pid);
        }
        self.advance_high_watermark(i, pid);
    }

    /// Fetch `pid` from `leader` (its replica's leader) from the next round on.
    fn start_fetching(&mut self, i: usize, pid: Pid, leader: BrokerId) {
        let b = &mut self.brokers[i];
        if leader >= 0 && !b.paused {
            (b.fetch_from.get_or_insert_with(leader, Ordered::default)).insert(pid, ());
            self.effects.push(Effect::Fetch(b.id));
        }
    }

    fn stop_fetching(&mut self, i: usize, pid: Pid, now: f64) {
        let b = &mut self.brokers[i];
        let me = b.id;
        let r = b.replicas.get_mut(&pid).expect("a hosted replica");
        let (leader, leader_epoch, fetched) = (r.leader, r.leader_epoch, r.fetched);
        r.fetched = false;
        if let Some(pending) = b.fetch_from.get_mut(&leader) {
            pending.remove(&pid);
            if pending.is_empty() {
                b.fetch_from.remove(&leader);
            }
        }
        // The leader learns that it stopped, if it fetched in this leadership.
        let Some(li) = self.at(leader).filter(|&li| fetched && li != i) else {
            return;
        };
        if let Some(lr) = self.brokers[li].replicas.get_mut(&pid) {
            if lr.role == Role::Leader && lr.leader_epoch == leader_epoch {
                let leo = lr.leo;
                if let Some(follower) = lr.follower(me) {
                    follower_left(follower, leo, now);
                }
            }
        }
    }

    // --- Leading: follower state, high watermark, ISR -----------------------------------------

    fn watch(&mut self, i: usize, pid: Pid) {
        let b = &mut self.brokers[i];
        b.isr_watch.insert(pid, ());
        self.effects.push(Effect::WatchIsr(b.id));
    }

    /// The high watermark of the broker's leader replica of `pid` (see `high_watermark`); an
    /// advance wakes the followers.
    fn advance_high_watermark(&mut self, i: usize, pid: Pid) {
        let b = &mut self.brokers[i];
        let r = b.replicas.get_mut(&pid).expect("a hosted replica");
        if let Some(wake) = high_watermark(r, pid, b.id, &mut self.ledger) {
            self.wake(&wake);
        }
    }

    /// The leader has new records or a new high watermark for these followers to fetch.
    fn wake(&mut self, wake: &Wake) {
        for &follower in &wake.followers {
            let Some(fi) = self.running_at(follower) else {
                continue;
            };
            let wanted = self.brokers[fi].replicas.get(&wake.pid).is_some_and(|r| {
                r.role == Role::Follower
                    && r.leader == wake.leader
                    && r.leader_epoch == wake.leader_epoch
            });
            if wanted {
                self.start_fetching(fi, wake.pid, wake.leader);
            }
        }
    }

    fn propose_isr(&mut self, i: usize, pid: Pid, isr: Brokers) {
        let b = &mut self.brokers[i];
        let r = b.replicas.get_mut(&pid).expect("a hosted replica");
        let mut leading = Leading {
            pid,
            leader: b.id,
            alter_queue: &mut b.alter_queue,
            ledger: &mut self.ledger,
            effects: &mut self.effects,
        };
        leading.propose_isr(r, isr);
    }

    fn adopt_isr(&mut self, i: usize, pid: Pid, isr: Brokers, partition_epoch: i32) {
        let b = &mut self.brokers[i];
        let r = b.replicas.get_mut(&pid).expect("a hosted replica");
        let held = match &r.pending {
            Some(pending) if pending.len() > r.isr.len() => pending.clone(),
            _ => r.isr.clone(),
        };
        if isr.len() > r.isr.len() {
            b.isr_expands += 1;
        } else if isr.len() < r.isr.len() {
            b.isr_shrinks += 1;
        }
        let changed = isr != held;
        r.isr = isr;
        r.partition_epoch = partition_epoch;
        r.pending = None;
        if changed {
            let (leader_epoch, isr) = (r.leader_epoch, r.isr.clone());
            self.ledger.isr_changed(pid, leader_epoch, &isr);
        }
        self.watch(i, pid);
        let r = self.replica(i, pid);
        if r.hw < r.leo {
            self.advance_high_watermark(i, pid);
        }
    }

    fn drop_proposal(&mut self, i: usize, pid: Pid) {
        let r = self.replica_mut(i, pid);
        r.pending = None;
        let (leader_epoch, isr) = (r.leader_epoch, r.isr.clone());
        self.ledger.isr_changed(pid, leader_epoch, &isr);
        self.watch(i, pid);
    }

    // --- Clients and inspection ---------------------------------------------------------------

    /// Append `records` records to the broker's leader replica of `pid`.
    pub fn produce(&mut self, broker: BrokerId, pid: Pid, records: i64, now: f64) -> ProduceError {
        let Some(i) = self.running_at(broker) else {
            return ProduceError::UnknownTopicOrPartition;
        };
        let Some(r) = self.brokers[i].replicas.get_mut(&pid) else {
            return ProduceError::UnknownTopicOrPartition;
        };
        match r.role {
            Role::Leader => {}
            Role::Offline => return ProduceError::KafkaStorageError,
            _ => return ProduceError::NotLeaderOrFollower,
        }
        let Some(leo) = r.leo.checked_add(records) else {
            return ProduceError::OffsetOverflow;
        };
        if r.epochs.last().is_none_or(|e| e.0 != r.leader_epoch) {
            r.epochs.push((r.leader_epoch, r.leo));
        }
        let previous = r.leo;
        r.leo = leo;
        for follower in &mut r.followers {
            if follower.fetching && follower.leo >= previous {
                follower.caught_up_at = now; // it was caught up until now
            }
        }
        let wake = Wake::of(r, pid, broker);
        let watch = !r.followers.is_empty();
        self.wake(&wake);
        if watch {
            self.watch(i, pid);
        }
        self.advance_high_watermark(i, pid);
        ProduceError::None
    }

    pub fn pause_fetching(&mut self, broker: BrokerId, now: f64) {
        let Some(i) = self.running_at(broker) else {
            return;
        };
        self.brokers[i].paused = true;
        for pid in self.followers_of(i) {
            self.stop_fetching(i, pid, now);
        }
    }

    pub fn resume_fetching(&mut self, broker: BrokerId) {
        let Some(i) = self.running_at(broker) else {
            return;
        };
        self.brokers[i].paused = false;
        for pid in self.followers_of(i) {
            let leader = self.replica(i, pid).leader;
            self.start_fetching(i, pid, leader);
        }
    }

    fn followers_of(&self, i: usize) -> Vec<Pid> {
        (self.brokers[i].replicas.iter())
            .filter(|(_, r)| r.role == Role::Follower)
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Fault injection: the broker's log of `pid` silently loses its records from `offset` on
    /// (as a disk that lies); nobody is told.
    pub fn lose_records(&mut self, broker: BrokerId, pid: Pid, offset: i64) {
        let replica = (self.at(broker)).and_then(|i| self.brokers[i].replicas.get_mut(&pid));
        if let Some(r) = replica {
            r.truncate_to(offset);
        }
    }

    /// A broker's replica of `pid`, if it has a log of it.
    pub fn replica_state(&self, broker: BrokerId, pid: Pid) -> Option<&Replica> {
        self.brokers[self.at(broker)?].replicas.get(&pid)
    }

    /// The partitions with a log on the broker, in the order they were first hosted.
    pub fn hosted(&self, broker: BrokerId) -> Vec<Pid> {
        self.at(broker)
            .map_or_else(Vec::new, |i| self.brokers[i].replicas.keys().collect())
    }

    pub fn metrics(&self, broker: BrokerId) -> Metrics {
        let mut m = Metrics {
            leaders: 0,
            partitions: 0,
            under_replicated: 0,
            offline: 0,
            isr_expands: 0,
            isr_shrinks: 0,
        };
        let Some(i) = self.at(broker) else {
            return m;
        };
        let b = &self.brokers[i];
        for (_, r) in b.replicas.iter() {
            match r.role {
                Role::Unhosted => continue,
                Role::Leader => {
                    m.leaders += 1;
                    if r.isr.len() + r.adding.len() < r.replicas.len() {
                        m.under_replicated += 1;
                    }
                }
                Role::Offline => m.offline += 1,
                _ => {}
            }
            m.partitions += 1;
        }
        m.isr_expands = b.isr_expands;
        m.isr_shrinks = b.isr_shrinks;
        m
    }

    /// Whether ISR changes are queued, or a follower still fetches from a live leader.
    pub fn busy(&self, broker: BrokerId) -> bool {
        let Some(i) = self.at(broker) else {
            return false;
        };
        let b = &self.brokers[i];
        !b.alter_queue.is_empty()
            || (b.fetch_from.iter())
                .any(|(leader, pending)| !pending.is_empty() && self.is_running(*leader))
    }

    // --- Fetching -----------------------------------------------------------------------------

    /// The broker's fetch round: per leader broker, each partition with something to fetch; a
    /// partition leaves the round's work once the follower had already caught up. Whether work
    /// is left.
    pub fn fetch_round(&mut self, broker: BrokerId, now: f64) -> bool {
        let Some(i) = self.running_at(broker) else {
            return false;
        };
        if self.brokers[i].paused {
            return false;
        }
        let max_records = self.brokers[i].max_fetch_records;
        let leaders: Vec<BrokerId> = self.brokers[i].fetch_from.keys().collect();
        for leader in leaders {
            let Some(li) = self.running_at(leader) else {
                continue; // the leader's broker is down: retry next round, as a fetcher reconnects
            };
            let pids: Vec<Pid> = (self.brokers[i].fetch_from.get(&leader))
                .map_or_else(Vec::new, |pending| pending.keys().collect());
            for pid in pids {
                let (follower, lb) = two(&mut self.brokers, i, li);
                let leader_epoch = follower
                    .replicas
                    .get(&pid)
                    .expect("a hosted replica")
                    .leader_epoch;
                let served = lb.replicas.get(&pid).is_some_and(|lr| {
                    lr.role == Role::Leader
                        && lr.leader_epoch == leader_epoch
                        && lr.followers.iter().any(|f| f.id == broker)
                });
                if !served {
                    continue; // not (yet) led there at this epoch: fetch again next round
                }
                let (follower, lb) = two(&mut self.brokers, i, li);
                let r = follower.replicas.get_mut(&pid).expect("a hosted replica");
                let lr = lb.replicas.get_mut(&pid).expect("a led replica");
                if r.truncate {
                    if r.leo != 0 {
                        r.truncate_to(common_log_prefix(&r.epochs, r.leo, &lr.epochs, lr.leo));
                    }
                    r.truncate = false;
                }
                let fetch_offset = r.leo;
                r.fetched = true;
                let leading = Leading {
                    pid,
                    leader,
                    alter_queue: &mut lb.alter_queue,
                    ledger: &mut self.ledger,
                    effects: &mut self.effects,
                };
                let wake = leading.record_fetch(lr, broker, fetch_offset, now);
                // The follower copies what the leader returned (its log's end, high watermark
                // and epochs after the fetch).
                let available = lr.leo - fetch_offset;
                let copied = max_records.map_or(available, |max| available.min(max));
                if copied > 0 {
                    r.leo += copied;
                    r.epochs = if copied == available {
                        lr.epochs.clone()
                    } else {
                        let leo = r.leo;
                        lr.epochs.iter().copied().filter(|e| e.1 < leo).collect()
                    };
                }
                r.hw = lr.hw.min(r.leo);
                if let Some(wake) = wake {
                    self.wake(&wake); // (the reference wakes them before the copy: the same)
                }
                if available <= 0 {
                    let fetch_from = &mut self.brokers[i].fetch_from;
                    if let Some(pending) = fetch_from.get_mut(&leader) {
                        pending.remove(&pid);
                    }
                }
            }
            let fetch_from = &mut self.brokers[i].fetch_from;
            if fetch_from.get(&leader).is_some_and(Ordered::is_empty) {
                fetch_from.remove(&leader);
            }
        }
        !self.brokers[i].fetch_from.is_empty()
    }

    // --- The ISR ------------------------------------------------------------------------------

    /// The isr-expiration task: shrink out followers not caught up for `max_lag` seconds, and
    /// add caught-up ones whose expansion waited for an earlier proposal. Whether it still has
    /// partitions to watch.
    pub fn check_isr(&mut self, broker: BrokerId, now: f64, max_lag: f64) -> bool {
        let Some(i) = self.running_at(broker) else {
            return false;
        };
        let watched: Vec<Pid> = self.brokers[i].isr_watch.keys().collect();
        for pid in watched {
            let r = self.replica_mut(i, pid);
            if r.pending.is_some() {
                continue;
            }
            let (leo, mut settled) = (r.leo, true);
            let mut out = Brokers::new();
            let mut joining = Brokers::new();
            for follower in &mut r.followers {
                let in_isr = r.isr.contains(&follower.id);
                if follower.leo < leo {
                    settled = false;
                    if in_isr && now - follower.caught_up_at > max_lag {
                        out.push(follower.id);
                    }
                } else if follower.fetching {
                    follower.caught_up_at = now;
                    if !in_isr {
                        settled = false;
                        joining.push(follower.id);
                    }
                } else if !in_isr {
                    settled = false;
                }
            }
            if !out.is_empty() {
                let isr = r.isr.iter().copied().filter(|b| !out.contains(b)).collect();
                self.propose_isr(i, pid, isr);
            } else if !joining.is_empty() {
                let mut isr = r.isr.clone();
                isr.extend(joining);
                self.propose_isr(i, pid, isr);
            } else if settled {
                self.brokers[i].isr_watch.remove(&pid);
            }
        }
        !self.brokers[i].isr_watch.is_empty()
    }

    /// Take the queued proposals as one request; `await_answer`: an AlterPartition whose answer
    /// `alter_partition_done` takes (else the caller writes them itself, `isr_written`).
    pub fn flush(&mut self, broker: BrokerId, await_answer: bool) -> Vec<Proposal> {
        let Some(i) = self.at(broker) else {
            return Vec::new();
        };
        let b = &mut self.brokers[i];
        let mut proposals = Vec::with_capacity(b.alter_queue.len());
        b.in_flight.clear();
        for (pid, isr) in b.alter_queue.iter() {
            let r = b.replicas.get(pid).expect("a led replica");
            proposals.push(Proposal {
                pid: *pid,
                isr: isr.clone(),
                leader_epoch: r.leader_epoch,
                partition_epoch: r.partition_epoch,
                controller_epoch: r.controller_epoch,
            });
            if await_answer {
                b.in_flight.push(Sent {
                    pid: *pid,
                    serial: r.serial,
                    leader_epoch: r.leader_epoch,
                    isr: isr.clone(),
                });
            }
        }
        b.alter_queue.clear();
        proposals
    }

    /// The partitions of the request in flight, in order (whose answers `alter_partition_done` takes).
    pub fn in_flight(&self, broker: BrokerId) -> Vec<Pid> {
        self.at(broker).map_or_else(Vec::new, |i| {
            self.brokers[i].in_flight.iter().map(|s| s.pid).collect()
        })
    }

    /// The answer to the request in flight: None for a top-level error (every proposal still
    /// current is queued again), else one answer per proposal, in order. The partitions whose
    /// proposal failed (to log), and whether proposals are queued.
    pub fn alter_partition_done(
        &mut self,
        broker: BrokerId,
        answers: Option<Vec<Answer>>,
    ) -> (Vec<Pid>, bool) {
        let Some(i) = self.at(broker) else {
            return (Vec::new(), false);
        };
        let sent = std::mem::take(&mut self.brokers[i].in_flight);
        let mut failed = Vec::new();
        for (k, s) in sent.into_iter().enumerate() {
            let current = self.brokers[i].replicas.get(&s.pid).is_some_and(|r| {
                r.serial == s.serial
                    && r.role == Role::Leader
                    && r.leader_epoch == s.leader_epoch
                    && r.pending.as_ref() == Some(&s.isr)
            });
            if !current {
                continue; // superseded by a LeaderAndIsr
            }
            let Some(answers) = &answers else {
                self.brokers[i].alter_queue.insert(s.pid, s.isr); // retried, as Kafka's AlterIsrManager does
                continue;
            };
            match &answers[k] {
                Answer::Committed(isr, leader_epoch, partition_epoch) => {
                    let r = self.replica(i, s.pid);
                    if *leader_epoch == r.leader_epoch && *partition_epoch >= r.partition_epoch {
                        self.adopt_isr(i, s.pid, isr.clone(), *partition_epoch);
                    }
                }
                Answer::AwaitLeaderAndIsr => {}
                Answer::Failed => {
                    failed.push(s.pid);
                    self.drop_proposal(i, s.pid);
                }
            }
        }
        (failed, !self.brokers[i].alter_queue.is_empty())
    }

    /// Before AlterPartition: the outcome of the leader's own writes, in order: the ISR and
    /// partition epoch written, or None for a write that failed (the proposal is dropped).
    pub fn isr_written(&mut self, broker: BrokerId, outcomes: Vec<(Pid, Option<(Brokers, i32)>)>) {
        let Some(i) = self.at(broker) else {
            return;
        };
        for (pid, outcome) in outcomes {
            if !self.brokers[i].replicas.contains(&pid) {
                continue;
            }
            match outcome {
                Some((isr, partition_epoch)) => self.adopt_isr(i, pid, isr, partition_epoch),
                None => self.drop_proposal(i, pid),
            }
        }
    }
}

/// What a leader's replica of `pid` changes beside itself: its broker's proposal queue, the
/// ledger and the timers.
struct Leading<'a> {
    pid: Pid,
    leader: BrokerId,
    alter_queue: &'a mut Ordered<Pid, Brokers>,
    ledger: &'a mut Ledger,
    effects: &'a mut Effects,
}

impl Leading<'_> {
    /// Propose `isr`: the committed ISR with members added, or with members removed (never both),
    /// so the maximal ISR the ledger holds is the longer of the two.
    fn propose_isr(&mut self, r: &mut Replica, isr: Brokers) {
        let maximal = if isr.len() > r.isr.len() {
            isr.clone()
        } else {
            r.isr.clone()
        };
        r.pending = Some(isr.clone());
        self.alter_queue.insert(self.pid, isr);
        self.ledger.isr_changed(self.pid, r.leader_epoch, &maximal);
        self.effects.push(Effect::Flush(self.leader));
    }

    /// Kafka's updateFollowerFetchState, then maybeExpandIsr and maybeIncrementLeaderHW: the
    /// followers to wake when the high watermark advanced.
    fn record_fetch(
        mut self,
        r: &mut Replica,
        follower_id: BrokerId,
        fetch_offset: i64,
        now: f64,
    ) -> Option<Wake> {
        let leo = r.leo;
        let follower = r.follower(follower_id).expect("a known follower");
        if fetch_offset >= leo {
            follower.caught_up_at = now;
        } else if fetch_offset >= follower.last_fetch_leo {
            follower.caught_up_at = follower.caught_up_at.max(follower.last_fetch_at);
        }
        follower.last_fetch_leo = leo;
        follower.last_fetch_at = now;
        follower.leo = fetch_offset;
        follower.fetching = true;
        if fetch_offset >= leo && r.pending.is_none() && !r.isr.contains(&follower_id) {
            let mut isr = r.isr.clone();
            isr.push(follower_id);
            self.propose_isr(r, isr);
        }
        high_watermark(r, self.pid, self.leader, self.ledger)
    }
}

/// HW = the smallest log end offset of the maximal ISR (committed plus proposed, KIP-497) of the
/// leader replica `r` (on broker `me`); an advance reaches the ledger. The followers to wake
/// when it advanced.
fn high_watermark(r: &mut Replica, pid: Pid, me: BrokerId, ledger: &mut Ledger) -> Option<Wake> {
    if r.hw >= r.leo {
        return None;
    }
    let mut hw = r.leo;
    for b in r.isr.iter().chain(r.pending.iter().flatten()) {
        if *b != me {
            hw = hw.min(
                r.followers
                    .iter()
                    .find(|f| f.id == *b)
                    .map_or(-1, |f| f.leo),
            );
        }
    }
    if hw <= r.hw {
        return None;
    }
    r.hw = hw;
    ledger.high_watermark_advanced(pid, hw);
    Some(Wake::of(r, pid, me))
}

/// A follower of a led replica stopped fetching: caught up until now if it was.
fn follower_left(follower: &mut Follower, leader_leo: i64, now: f64) {
    if follower.fetching {
        if follower.leo >= leader_leo {
            follower.caught_up_at = now;
        }
        follower.fetching = false;
    }
}

/// Two distinct brokers, both mutable.
fn two(brokers: &mut [Broker], a: usize, b: usize) -> (&mut Broker, &mut Broker) {
    assert_ne!(a, b, "a follower never fetches from itself");
    if a < b {
        let (low, high) = brokers.split_at_mut(b);
        (&mut low[a], &mut high[0])
    } else {
        let (low, high) = brokers.split_at_mut(a);
        (&mut high[0], &mut low[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        pid: Pid,
        leader: BrokerId,
        leader_epoch: i32,
        isr: &[BrokerId],
        replicas: &[BrokerId],
    ) -> LeaderAndIsrRow {
        LeaderAndIsrRow {
            pid,
            controller_epoch: 1,
            leader,
            leader_epoch,
            isr: Brokers::from_slice(isr),
            partition_epoch: 0,
            replicas: Brokers::from_slice(replicas),
            adding: Brokers::new(),
        }
    }

    #[test]
    fn ordered_keeps_python_dict_order() {
        let mut map: Ordered<u32, u32> = Ordered::default();
        for k in 0..40 {
            map.insert(k, k);
        }
        map.insert(3, 33); // in its place
        for k in 0..30 {
            if k != 3 {
                map.remove(&k); // compacts on the way
            }
        }
        map.insert(0, 0); // removed then set: last
        let keys: Vec<u32> = map.keys().collect();
        assert_eq!(keys, [3, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 0]);
        assert_eq!(map.get(&3), Some(&33));
        assert_eq!(map.len(), 12);
    }

    #[test]
    fn common_prefix_of_two_logs() {
        assert_eq!(
            common_log_prefix(&[(0, 0), (1, 5)], 8, &[(0, 0), (2, 5)], 9),
            5
        );
        assert_eq!(common_log_prefix(&[(0, 0)], 8, &[(0, 0), (1, 6)], 9), 6);
        assert_eq!(common_log_prefix(&[(0, 0)], 4, &[(0, 0)], 9), 4);
    }

    #[test]
    fn a_follower_fetches_joins_the_isr_and_the_high_watermark_follows() {
        let mut plane = DataPlane::new();
        plane.startup(1, None, true);
        plane.startup(2, None, true);
        plane.leader_and_isr(1, vec![row(7, 1, 0, &[1], &[1, 2])], 0.0);
        plane.leader_and_isr(2, vec![row(7, 1, 0, &[1], &[1, 2])], 0.0);
        assert_eq!(
            plane.take_effects(),
            [Effect::WatchIsr(1), Effect::Fetch(2)]
        );
        assert_eq!(plane.produce(1, 7, 5, 1.0), ProduceError::None);
        assert!(plane.fetch_round(2, 1.5)); // copies 5 records, not yet caught up
        assert_eq!(plane.replica_state(2, 7).map(|r| r.leo), Some(5));
        assert!(!plane.fetch_round(2, 2.0)); // caught up: proposes 2 into the ISR
        assert!(plane.take_effects().contains(&Effect::Flush(1)));
        let proposals = plane.flush(1, true);
        assert_eq!(proposals[0].isr.as_slice(), [1, 2]);
        let answer = Answer::Committed(Brokers::from_slice(&[1, 2]), 0, 1);
        assert_eq!(
            plane.alter_partition_done(1, Some(vec![answer])),
            (vec![], false)
        );
        let leader = plane.replica_state(1, 7).expect("led");
        assert_eq!(
            (leader.hw, leader.isr.as_slice(), leader.partition_epoch),
            (5, &[1, 2][..], 1)
        );
        assert_eq!(plane.committed_offset(7), 5);
        assert_eq!(plane.metrics(1).isr_expands, 1);
    }

    #[test]
    fn elections_are_judged_against_the_last_leaders_isr() {
        let mut plane = DataPlane::new();
        for b in [1, 2, 3] {
            plane.startup(b, None, true);
        }
        plane.leader_and_isr(1, vec![row(0, 1, 0, &[1, 2], &[1, 2, 3])], 0.0);
        plane.produce(1, 0, 10, 0.0);
        plane.leader_and_isr(2, vec![row(0, 1, 0, &[1, 2], &[1, 2, 3])], 0.0);
        plane.fetch_round(2, 0.5);
        plane.fetch_round(2, 1.0);
        assert_eq!(plane.committed_offset(0), 10);
        plane.shutdown(1, 2.0);
        plane.leader_and_isr(3, vec![row(0, 3, 1, &[3], &[1, 2, 3])], 2.0); // unclean
        assert_eq!(
            (plane.unclean_elections(), plane.truncated_records()),
            (1, 10)
        );
        plane.lose_records(2, 0, 0);
        plane.leader_and_isr(2, vec![row(0, 2, 2, &[2], &[1, 2, 3])], 3.0);
        assert!(plane.violations().is_empty()); // 2 was not in 3's ISR: unclean again
        plane.leader_and_isr(3, vec![row(0, 3, 3, &[3], &[1, 2, 3])], 4.0);
        plane.produce(3, 0, 4, 4.0);
        plane.shutdown(3, 5.0);
        plane.leader_and_isr(2, vec![row(0, 2, 4, &[2], &[1, 2, 3])], 5.0);
        assert_eq!(plane.violations().len(), 0); // 2 was in 3's ISR, but nothing was committed
        plane.stop_replicas(2, &[(0, true, true)], 6.0);
        assert_eq!((plane.committed_offset(0), plane.hosted(2)), (0, vec![]));
    }
}
