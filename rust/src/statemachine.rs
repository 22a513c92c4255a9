//! Both state machines (reference §3, §4), natively: a port of `kctl.reference`'s
//! `partition_state_machine` and `replica_state_machine` that keeps their order of store calls,
//! results and log lines, so the two engines can be compared line for line.

use std::borrow::Cow;
use std::sync::Arc;

use crate::hash::{HashMap, HashSet};

use crate::context::{Context, Part, Replica};
use crate::election::{self, Candidates, Input, Pick, Strategy};
use crate::model::{
    joined, BrokerId, Brokers, LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionState,
    ReplicaState, NO_LEADER,
};
use crate::requests::{RequestBatch, Sent};
use crate::store::{Failure, FailureKind, Read, Store};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Trace,
    Info,
    Error,
}

/// State-change log lines of one call, without the `[Controller id=… epoch=…]` prefix. Lines of
/// the request batch (`from_batch`) go to the batch's logger, the others to the state machine's.
#[derive(Debug, Default)]
pub struct Log {
    pub lines: Vec<Line>,
    pub trace: bool,
    pub info: bool,
    /// Whether the batch's logger wants INFO lines.
    pub batch_info: bool,
}

#[derive(Debug)]
pub struct Line {
    pub level: Level,
    pub from_batch: bool,
    pub text: Text,
}

/// A line's text: made at once, or, for the lines a bulk transition makes one of per partition or
/// replica (60K in a creation of 20K partitions, RF 2), the transition's data, made text only
/// when read ([`Text::made`]), which a caller holding its lines does after its writes.
#[derive(Debug)]
pub enum Text {
    Made(String),
    /// A partition created (NonExistent to New): a line per partition of a creation.
    PartitionNew {
        topic: Arc<str>,
        partition: i32,
        from: PartitionState,
        replicas: Brokers,
    },
    ReplicaChanged {
        topic: Arc<str>,
        partition: i32,
        broker: BrokerId,
        from: ReplicaState,
        to: ReplicaState,
    },
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Self::Made(text)
    }
}

impl Text {
    pub fn made(&self) -> Cow<'_, str> {
        match self {
            Self::Made(text) => Cow::Borrowed(text),
            Self::PartitionNew {
                topic,
                partition,
                from,
                replicas,
            } => Cow::Owned(format!(
                "Changed partition {topic}-{partition} state from {from} to {} with assigned replicas {}",
                PartitionState::New,
                joined(replicas, ",")
            )),
            Self::ReplicaChanged {
                topic,
                partition,
                broker,
                from,
                to,
            } => Cow::Owned(format!(
                "Changed state of replica {broker} for partition {topic}-{partition} from {from} to {to}"
            )),
        }
    }
}

impl Log {
    pub fn enabled(&self, level: Level) -> bool {
        match level {
            Level::Trace => self.trace,
            Level::Info => self.info,
            Level::Error => true,
        }
    }

    fn push(&mut self, level: Level, text: impl Into<Text>) {
        self.lines.push(Line {
            level,
            from_batch: false,
            text: text.into(),
        });
    }
}

/// One election batch handed to a selector: only partitions with allowed replicas.
pub struct SelectionBatch<'a> {
    pub strategy: Strategy,
    pub parts: Vec<Part>,
    pub candidates: Vec<&'a Candidates>,
    pub isrs: Vec<&'a [BrokerId]>,
}

pub trait Selector {
    /// One pick per partition of the batch.
    fn select(&mut self, ctx: &Context, batch: &SelectionBatch<'_>) -> Result<Vec<Pick>, Failure>;

    /// Whether the picks are Kafka's rule (the first allowed replica), known without asking: an
    /// election may then start from a cached state ([`Machine::read_or_cached`]).
    fn is_kafkas(&self) -> bool {
        false
    }
}

/// Kafka's rule for every strategy.
pub struct KafkaSelector;

impl Selector for KafkaSelector {
    fn select(&mut self, _ctx: &Context, batch: &SelectionBatch<'_>) -> Result<Vec<Pick>, Failure> {
        Ok(batch
            .candidates
            .iter()
            .map(|c| {
                c.allowed
                    .first()
                    .map_or(Pick::NoLeader, |b| Pick::Leader(*b))
            })
            .collect())
    }

    fn is_kafkas(&self) -> bool {
        true
    }
}

pub type Outcome = Result<LeaderAndIsr, Failure>;
pub type ReplicaOutcome = Result<ReplicaState, Failure>;
/// Finished elections and the partitions to retry.
type ElectionRound = (Vec<(Part, Outcome)>, Vec<Part>);

/// What a state-machine call works with.
pub struct Machine<'a> {
    pub controller_id: i32,
    pub ctx: &'a mut Context,
    pub batch: &'a mut RequestBatch,
    pub store: &'a mut (dyn Store + Send),
    pub log: &'a mut Log,
    pub sent: &'a mut Vec<Sent>,
    pub stop_replica_version: i32,
    pub leader_recovery: bool,
    pub unclean_default: bool,
}

/// `items` without repeats, first occurrences in order. Strictly ascending items (the context's
/// lists of partitions mostly are) have none, which is checked without a set of them.
fn dedupe<T: Copy + Ord + std::hash::Hash>(items: &[T]) -> Vec<T> {
    if items.is_sorted_by(|a, b| a < b) {
        return items.to_vec();
    }
    let mut seen = HashSet::with_capacity_and_hasher(items.len(), Default::default());
    items.iter().copied().filter(|i| seen.insert(*i)).collect()
}

/// The replicas without repeats (the first kept), grouped by broker in ascending id order, each
/// group in input order: what deduplicating and then sorting stably by broker gives, counted into
/// place and deduplicated with a bit per partition instead (a failover hands over 3M replicas,
/// where a set of them and a sort cost a third of its replica state machine's startup).
/// Replicas already grouped, ascending by broker then partition (as the startup reads them from
/// the context's replica index), are returned as they are.
fn group_by_broker(replicas: &[Replica]) -> Cow<'_, [Replica]> {
    if replicas.is_sorted_by(|(p, b), (q, c)| (b, p) < (c, q)) {
        return Cow::Borrowed(replicas);
    }
    let mut slots: HashMap<BrokerId, usize> = HashMap::default();
    let mut counts: Vec<usize> = Vec::new();
    let mut slot_per_replica: Vec<u32> = Vec::with_capacity(replicas.len());
    for &(_, b) in replicas {
        let fresh = slots.len();
        let slot = *slots.entry(b).or_insert(fresh);
        if slot == fresh {
            counts.push(0);
        }
        counts[slot] += 1;
        slot_per_replica.push(u32::try_from(slot).expect("fewer brokers than u32::MAX"));
    }
    let mut order: Vec<(BrokerId, usize)> = slots.into_iter().collect();
    order.sort_unstable();
    let mut next = vec![0; counts.len()];
    let mut start = 0;
    for (_, slot) in order {
        next[slot] = start;
        start += counts[slot];
    }
    let mut grouped = vec![(0, 0); replicas.len()];
    for (&r, &slot) in replicas.iter().zip(&slot_per_replica) {
        let at = &mut next[slot as usize];
        grouped[*at] = r;
        *at += 1;
    }
    drop(slot_per_replica);
    // A repeat is the same partition twice in its broker's group.
    let words = replicas
        .iter()
        .map(|(p, _)| *p as usize / 64 + 1)
        .max()
        .unwrap_or(0);
    let mut seen = vec![0u64; words];
    let (mut read, mut kept) = (0, 0);
    while read < grouped.len() {
        let (group_start, broker) = (kept, grouped[read].1);
        while read < grouped.len() && grouped[read].1 == broker {
            let p = grouped[read].0 as usize;
            if seen[p / 64] & (1 << (p % 64)) == 0 {
                seen[p / 64] |= 1 << (p % 64);
                grouped[kept] = grouped[read];
                kept += 1;
            }
            read += 1;
        }
        for &(p, _) in &grouped[group_start..kept] {
            seen[p as usize / 64] = 0;
        }
    }
    grouped.truncate(kept);
    Cow::Owned(grouped)
}

/// The results of a replica state machine call, or none when its caller reads none (a broker
/// change's and a startup's): a result per replica is some 80 bytes, and a list of a broker's
/// 3K of them took fresh memory at each broker change.
struct ReplicaResults {
    items: Vec<(Replica, ReplicaOutcome)>,
    keep: bool,
}

impl ReplicaResults {
    fn push(&mut self, r: Replica, outcome: ReplicaOutcome) {
        if self.keep {
            self.items.push((r, outcome));
        }
    }
}

impl Machine<'_> {
    fn new_batch(&mut self) -> Result<(), Failure> {
        self.batch
            .check_empty()
            .map_err(|m| Failure::new(FailureKind::IllegalState, m))
    }

    fn send(&mut self) {
        let log = &mut *self.log;
        let wanted = log.batch_info;
        let sent = self
            .batch
            .send(self.ctx, self.stop_replica_version, &mut |text| {
                if wanted {
                    log.lines.push(Line {
                        level: Level::Info,
                        from_batch: true,
                        text: Text::Made(text),
                    });
                }
            });
        self.sent.extend(sent);
    }

    fn fence(&self) -> i32 {
        self.ctx.epoch_zk_version
    }

    // === Partition state machine ================================================================

    /// `handle_state_changes` of the partition state machine: results for the partitions that went
    /// through an election; `Err` only for a moved controller (the batch is not sent).
    pub fn handle_partition_state_changes(
        &mut self,
        parts: &[Part],
        target: PartitionState,
        election: Option<Strategy>,
        selector: &mut dyn Selector,
    ) -> Result<Vec<(Part, Outcome)>, Failure> {
        let parts = dedupe(parts);
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        self.batch.reserve(parts.len());
        let attempt = self
            .new_batch()
            .and_then(|()| self.do_partition_state_changes(&parts, target, election, selector));
        match attempt {
            Ok(results) => {
                self.send();
                Ok(results)
            }
            Err(e) if e.kind == FailureKind::ControllerMoved => Err(e),
            Err(e) => Ok(all_failed(&parts, &e)),
        }
    }

    fn do_partition_state_changes(
        &mut self,
        parts: &[Part],
        target: PartitionState,
        election: Option<Strategy>,
        selector: &mut dyn Selector,
    ) -> Result<Vec<(Part, Outcome)>, Failure> {
        // One pass: a partition's check reads only its own state (the partitions are distinct).
        let mut valid = Vec::with_capacity(parts.len());
        for &p in parts {
            if !self.ctx.has_partition_state(p) {
                self.ctx.put_partition_state(p, PartitionState::NonExistent);
            }
            if target
                .valid_previous_states()
                .contains(&self.ctx.partition_state(p))
            {
                valid.push(p);
            } else {
                self.log_invalid_partition_transition(p, target);
            }
        }
        match target {
            PartitionState::New => {
                for p in valid {
                    if self.log.enabled(Level::Info) {
                        let text = Text::PartitionNew {
                            topic: self.ctx.topic_name_arc(self.ctx.partition_topic(p)),
                            partition: self.ctx.partition_id(p),
                            from: self.ctx.partition_state(p),
                            replicas: Brokers::from_slice(self.ctx.replicas(p)),
                        };
                        self.log.push(Level::Info, text);
                    }
                    self.ctx.put_partition_state(p, PartitionState::New);
                }
                Ok(Vec::new())
            }
            PartitionState::Online => {
                let uninitialized: Vec<Part> = valid
                    .iter()
                    .copied()
                    .filter(|p| self.ctx.partition_state(*p) == PartitionState::New)
                    .collect();
                let to_elect: Vec<Part> = valid
                    .iter()
                    .copied()
                    .filter(|p| {
                        matches!(
                            self.ctx.partition_state(*p),
                            PartitionState::Online | PartitionState::Offline
                        )
                    })
                    .collect();
                for p in self.initialize_leader_and_isr(&uninitialized)? {
                    if self.log.enabled(Level::Info) {
                        let lai = self
                            .ctx
                            .leadership(p)
                            .expect("just initialized")
                            .leader_and_isr;
                        let line = format!(
                            "Changed partition {} from {} to {target} with state {lai}",
                            self.ctx.tp_name(p),
                            self.ctx.partition_state(p)
                        );
                        self.log.push(Level::Info, line);
                    }
                    self.ctx.put_partition_state(p, PartitionState::Online);
                }
                if to_elect.is_empty() {
                    return Ok(Vec::new());
                }
                let Some(strategy) = election else {
                    return Err(Failure::new(
                        FailureKind::IllegalArgument,
                        "Election strategy is a required field when the target state is OnlinePartition",
                    ));
                };
                let results = self.elect_leaders(&to_elect, strategy, selector)?;
                for (p, outcome) in &results {
                    if let Ok(lai) = outcome {
                        if self.log.enabled(Level::Info) {
                            let line = format!(
                                "Changed partition {} from {} to {target} with state {lai}",
                                self.ctx.tp_name(*p),
                                self.ctx.partition_state(*p)
                            );
                            self.log.push(Level::Info, line);
                        }
                        self.ctx.put_partition_state(*p, PartitionState::Online);
                    }
                }
                Ok(results)
            }
            PartitionState::Offline | PartitionState::NonExistent => {
                for p in valid {
                    if self.log.enabled(Level::Trace) {
                        let line = format!(
                            "Changed partition {} state from {} to {target}",
                            self.ctx.tp_name(p),
                            self.ctx.partition_state(p)
                        );
                        self.log.push(Level::Trace, line);
                    }
                    self.ctx.put_partition_state(p, target);
                }
                Ok(Vec::new())
            }
        }
    }

    fn initialize_leader_and_isr(&mut self, parts: &[Part]) -> Result<Vec<Part>, Failure> {
        let mut states: Vec<(Part, LeaderIsrAndControllerEpoch)> = Vec::new();
        for &p in parts {
            let replicas = self.ctx.replicas(p).to_vec();
            let live: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .filter(|r| self.ctx.is_replica_online(*r, p, false))
                .collect();
            if live.is_empty() {
                let message = format!(
                    "Controller {} epoch {} encountered error during state change of partition {} from New to Online, assigned replicas are [{}], live brokers are [{}]. No assigned replica is alive.",
                    self.controller_id,
                    self.ctx.epoch,
                    self.ctx.tp_name(p),
                    joined(&replicas, ","),
                    joined(&self.ctx.live_broker_ids(), ",")
                );
                self.log_failed_partition(
                    p,
                    PartitionState::New,
                    PartitionState::Online,
                    &Failure::state_change_failed(message),
                );
                continue;
            }
            let lai = LeaderAndIsr::new(live[0], live.into_iter().collect());
            states.push((
                p,
                LeaderIsrAndControllerEpoch {
                    leader_and_isr: lai,
                    controller_epoch: self.ctx.epoch,
                },
            ));
        }
        if states.is_empty() {
            return Ok(Vec::new());
        }
        let responses = match self.store.create_states(self.ctx, &states, self.fence()) {
            Ok(responses) => responses,
            Err(e) if e.kind == FailureKind::ControllerMoved => return Err(e),
            Err(e) => {
                for (p, _) in &states {
                    let current = self.ctx.partition_state(*p);
                    self.log_failed_partition(*p, current, PartitionState::New, &e);
                }
                return Ok(Vec::new());
            }
        };
        let mut initialized = Vec::new();
        for ((p, lice), error) in states.into_iter().zip(responses) {
            if let Some(error) = error {
                self.log_failed_partition(p, PartitionState::New, PartitionState::Online, &error);
                continue;
            }
            self.ctx.put_leadership(p, &lice);
            let isr = lice.leader_and_isr.isr.clone();
            self.batch
                .add_leader_and_isr_assigned(self.ctx, &isr, p, &lice, true);
            initialized.push(p);
        }
        Ok(initialized)
    }

    fn elect_leaders(
        &mut self,
        parts: &[Part],
        strategy: Strategy,
        selector: &mut dyn Selector,
    ) -> Result<Vec<(Part, Outcome)>, Failure> {
        let mut finished: Vec<(Part, Outcome)> = Vec::new();
        let mut remaining = parts.to_vec();
        // The first round may start from cached states; a retry reads, as Kafka's every round.
        let mut cache = selector.is_kafkas();
        while !remaining.is_empty() {
            let (done, retry) = self.do_elect_leaders(&remaining, strategy, selector, cache)?;
            cache = false;
            for (p, outcome) in &done {
                if let Err(e) = outcome {
                    let current = self.ctx.partition_state(*p);
                    self.log_failed_partition(*p, current, PartitionState::Online, e);
                }
            }
            finished.extend(done);
            remaining = retry;
        }
        Ok(finished)
    }

    fn do_elect_leaders(
        &mut self,
        parts: &[Part],
        strategy: Strategy,
        selector: &mut dyn Selector,
        cache: bool,
    ) -> Result<ElectionRound, Failure> {
        let reads = match self.read_or_cached(parts, cache, |m, p, lice| {
            m.cached_election_writes(p, lice, strategy)
        }) {
            Ok(reads) => reads,
            Err(e) => return Ok((all_failed(parts, &e), Vec::new())),
        };
        let mut failed: Vec<(Part, Outcome)> = Vec::new();
        let mut current: Vec<(Part, LeaderAndIsr)> = Vec::new();
        for (&p, read) in parts.iter().zip(reads) {
            match read {
                Read::Missing => failed.push((
                    p,
                    Err(Failure::state_change_failed(format!(
                        "LeaderAndIsr information doesn't exist for partition {} in {} state",
                        self.ctx.tp_name(p),
                        self.ctx.partition_state(p)
                    ))),
                )),
                Read::Failed(e) => failed.push((p, Err(e))),
                Read::Found(lice) if lice.controller_epoch > self.ctx.epoch => failed.push((
                    p,
                    Err(Failure::state_change_failed(format!(
                        "Aborted leader election for partition {} since the LeaderAndIsr path was already written by another controller. This probably means that the current controller {} went through a soft failure and another controller was elected with epoch {}.",
                        self.ctx.tp_name(p),
                        self.controller_id,
                        lice.controller_epoch
                    ))),
                )),
                Read::Found(lice) => current.push((p, lice.leader_and_isr)),
            }
        }
        if current.is_empty() {
            return Ok((failed, Vec::new()));
        }
        let inputs = self.election_inputs(current, strategy)?;
        let candidates: Vec<Candidates> = inputs
            .iter()
            .map(|i| election::candidates(self.ctx, strategy, i))
            .collect();
        let picks = self.select(strategy, &inputs, &candidates, selector)?;
        // Each update's recipients at its position.
        let mut recipients: Vec<Brokers> = Vec::with_capacity(inputs.len());
        let mut updates: Vec<(Part, LeaderAndIsr)> = Vec::with_capacity(inputs.len());
        for ((input, cand), pick) in inputs.iter().zip(candidates).zip(picks) {
            match pick {
                Pick::Leader(leader) => {
                    if cand.unclean {
                        self.ctx.record_unclean_leader_election();
                    }
                    let state = election::new_state(
                        self.ctx,
                        strategy,
                        input,
                        leader,
                        self.leader_recovery,
                    );
                    updates.push((input.part, state));
                    recipients.push(cand.recipients);
                }
                Pick::NoLeader => failed.push((
                    input.part,
                    Err(Failure::state_change_failed(format!(
                        "Failed to elect leader for partition {} under strategy {}",
                        self.ctx.tp_name(input.part),
                        strategy.kafka_string()
                    ))),
                )),
                Pick::Error(failure) => failed.push((input.part, Err(failure))),
            }
        }
        let outcome = self
            .store
            .update_states(self.ctx, &updates, self.ctx.epoch, self.fence())?;
        let mut finished: Vec<(Part, Outcome)> = Vec::with_capacity(updates.len() + failed.len());
        let at: Vec<usize> = (0..updates.len()).collect();
        let position = Positions::new(&updates, &at);
        let mut requests = Vec::with_capacity(outcome.successful.len());
        for (p, state) in outcome.successful {
            let lice = LeaderIsrAndControllerEpoch {
                leader_and_isr: state.clone(),
                controller_epoch: self.ctx.epoch,
            };
            self.ctx.put_leadership(p, &lice);
            // None for a partition not asked (a store plugin answering for others).
            let to = position
                .find(p)
                .map(|i| std::mem::take(&mut recipients[i]))
                .unwrap_or_default();
            requests.push((p, to, lice));
            finished.push((p, Ok(state)));
        }
        // A partition's requests read nothing another's new leadership changes: one run.
        self.batch.add_leader_and_isr_run(self.ctx, &requests);
        finished.extend(outcome.failed.into_iter().map(|(p, e)| (p, Err(e))));
        finished.extend(failed);
        Ok((finished, outcome.to_retry))
    }

    /// Whether a cached state stands in for Kafka's read before an election: written by no newer
    /// controller, and one that Kafka's rule elects a leader from without the unclean path (which
    /// reads topic configs first): the election is then a conditional write at the cached version,
    /// which fails if the state changed since (and the partition is read and elected again).
    fn cached_election_writes(
        &self,
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        strategy: Strategy,
    ) -> bool {
        let current = &lice.leader_and_isr;
        if lice.controller_epoch > self.ctx.epoch {
            return false;
        }
        let live_isr = || {
            current
                .isr
                .iter()
                .any(|r| self.ctx.is_replica_online(*r, p, false))
        };
        if matches!(strategy, Strategy::Offline { .. }) && !live_isr() {
            return false;
        }
        let input = Input {
            part: p,
            current: current.clone(),
            unclean_allowed: Some(false),
        };
        let candidates = election::candidates(self.ctx, strategy, &input);
        !candidates.allowed.is_empty() && !candidates.unclean
    }

    /// The states a round of conditional writes starts from, in `parts`' order. Kafka reads every
    /// state first; where `cache` is set and the store asks for it ([`Store::writes_from_cache`]: a
    /// read is a round trip), the context's state of each partition `stands_in` accepts is used
    /// instead (the state a failover loaded or a write of this controller returned, with its znode
    /// version), and only the others are read. `stands_in` accepts only states the round turns into
    /// a conditional write, which fails if the znode changed since the context got it (BADVERSION:
    /// read again and retried; NONODE: failed), exactly as Kafka's write fails when the change
    /// lands between its read and its write: the outcome is Kafka's for that timing, and an
    /// unchanged znode gets Kafka's write.
    fn read_or_cached(
        &mut self,
        parts: &[Part],
        cache: bool,
        stands_in: impl Fn(&Self, Part, &LeaderIsrAndControllerEpoch) -> bool,
    ) -> Result<Vec<Read>, Failure> {
        if !cache || !self.store.writes_from_cache() {
            return self.store.read_states(self.ctx, parts);
        }
        let mut reads: Vec<Option<Read>> = Vec::with_capacity(parts.len());
        let mut to_read = Vec::new();
        for &p in parts {
            match self.ctx.leadership(p) {
                Some(lice) if stands_in(self, p, &lice) => reads.push(Some(Read::Found(lice))),
                _ => {
                    to_read.push(p);
                    reads.push(None);
                }
            }
        }
        if !to_read.is_empty() {
            let mut found = self.store.read_states(self.ctx, &to_read)?.into_iter();
            for slot in reads.iter_mut().filter(|r| r.is_none()) {
                *slot = found.next();
            }
        }
        let unanswered = || Read::Failed(Failure::new(FailureKind::Other, "no state read"));
        Ok(reads
            .into_iter()
            .map(|r| r.unwrap_or_else(unanswered))
            .collect())
    }

    /// Whether each offline election may be unclean (reference §2.3): partitions without a live
    /// ISR member first, their topics' `unclean.leader.election.enable` deciding.
    fn election_inputs(
        &mut self,
        current: Vec<(Part, LeaderAndIsr)>,
        strategy: Strategy,
    ) -> Result<Vec<Input>, Failure> {
        let Strategy::Offline { allow_unclean } = strategy else {
            return Ok(current
                .into_iter()
                .map(|(part, current)| Input {
                    part,
                    current,
                    unclean_allowed: Some(false),
                })
                .collect());
        };
        let has_live_isr = |ctx: &Context, p: Part, lai: &LeaderAndIsr| {
            lai.isr.iter().any(|r| ctx.is_replica_online(*r, p, false))
        };
        let (without, with): (Vec<_>, Vec<_>) = current
            .into_iter()
            .partition(|(p, lai)| !has_live_isr(self.ctx, *p, lai));
        let mut inputs = Vec::with_capacity(without.len() + with.len());
        if allow_unclean {
            inputs.extend(without.into_iter().map(|(part, current)| Input {
                part,
                current,
                unclean_allowed: Some(true),
            }));
        } else {
            let mut topics: Vec<u32> = Vec::new();
            let mut index_of: HashMap<u32, usize> = HashMap::default();
            for (p, _) in &without {
                let t = self.ctx.partition_topic(*p);
                index_of.entry(t).or_insert_with(|| {
                    topics.push(t);
                    topics.len() - 1
                });
            }
            let enabled = self.unclean_election_enabled(&topics)?;
            for (part, current) in without {
                match &enabled[index_of[&self.ctx.partition_topic(part)]] {
                    Ok(flag) => inputs.push(Input {
                        part,
                        current,
                        unclean_allowed: Some(*flag),
                    }),
                    Err(e) => {
                        let state = self.ctx.partition_state(part);
                        self.log_failed_partition(part, state, PartitionState::Online, e);
                        inputs.push(Input {
                            part,
                            current,
                            unclean_allowed: None,
                        });
                    }
                }
            }
        }
        inputs.extend(with.into_iter().map(|(part, current)| Input {
            part,
            current,
            unclean_allowed: Some(false),
        }));
        Ok(inputs)
    }

    fn unclean_election_enabled(
        &mut self,
        topics: &[u32],
    ) -> Result<Vec<Result<bool, Failure>>, Failure> {
        let overrides = match self.store.unclean_overrides(self.ctx, topics) {
            Ok(values) => values,
            Err(e) if e.store_error => return Ok(topics.iter().map(|_| Err(e.clone())).collect()),
            Err(e) => return Err(e),
        };
        Ok(overrides
            .into_iter()
            .zip(topics)
            .map(|(value, t)| match value? {
                None => Ok(self.unclean_default),
                Some(v) => match v.trim().to_lowercase().as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    _ => Err(Failure::state_change_failed(format!(
                        "Invalid value '{v}' for configuration unclean.leader.election.enable of topic {}",
                        self.ctx.topic_name(*t)
                    ))),
                },
            })
            .collect())
    }

    fn select(
        &mut self,
        strategy: Strategy,
        inputs: &[Input],
        candidates: &[Candidates],
        selector: &mut dyn Selector,
    ) -> Result<Vec<Pick>, Failure> {
        let mut picks = vec![Pick::NoLeader; inputs.len()];
        let eligible: Vec<usize> = (0..inputs.len())
            .filter(|i| !candidates[*i].allowed.is_empty())
            .collect();
        if eligible.is_empty() {
            return Ok(picks);
        }
        let batch = SelectionBatch {
            strategy,
            parts: eligible.iter().map(|i| inputs[*i].part).collect(),
            candidates: eligible.iter().map(|i| &candidates[*i]).collect(),
            isrs: eligible
                .iter()
                .map(|i| inputs[*i].current.isr.as_slice())
                .collect(),
        };
        for (i, pick) in eligible.into_iter().zip(selector.select(self.ctx, &batch)?) {
            picks[i] = pick;
        }
        Ok(picks)
    }

    fn log_invalid_partition_transition(&mut self, p: Part, target: PartitionState) {
        let current = self.ctx.partition_state(p);
        let valid: Vec<&str> = target
            .valid_previous_states()
            .iter()
            .map(|s| s.kafka_name())
            .collect();
        let error = Failure::new(
            FailureKind::IllegalState,
            format!(
                "Partition {} should be in one of {} states before moving to {target} state. Instead it is in {current} state",
                self.ctx.tp_name(p),
                valid.join(",")
            ),
        );
        self.log_failed_partition(p, current, target, &error);
    }

    fn log_failed_partition(
        &mut self,
        p: Part,
        current: PartitionState,
        target: PartitionState,
        error: &Failure,
    ) {
        let line = format!(
            "Controller {} epoch {} failed to change state for partition {} from {current} to {target}: {}",
            self.controller_id,
            self.ctx.epoch,
            self.ctx.tp_name(p),
            error.describe()
        );
        self.log.push(Level::Error, line);
    }

    // === Replica state machine ==================================================================

    /// `handle_state_changes` of the replica state machine: per valid replica its new state or
    /// why it kept its old one; `Err` only for a moved controller.
    pub fn handle_replica_state_changes(
        &mut self,
        replicas: &[Replica],
        target: ReplicaState,
    ) -> Result<Vec<(Replica, ReplicaOutcome)>, Failure> {
        self.replica_state_changes_by_broker(&group_by_broker(replicas), target, true)
    }

    /// [`Self::handle_replica_state_changes`] for a caller that reads no result (the state
    /// machine's startup): the same transitions, requests and log lines, without a result per
    /// replica held to the end (at a failover of 1M partitions they were 3M, about 0.5 KB per
    /// partition once handed to Python).
    pub fn handle_replica_state_changes_unread(
        &mut self,
        replicas: &[Replica],
        target: ReplicaState,
    ) -> Result<(), Failure> {
        self.replica_state_changes_by_broker(&group_by_broker(replicas), target, false)
            .map(drop)
    }

    /// The transitions of unique replicas grouped by broker in ascending order
    /// ([`group_by_broker`]), the groups visited in Kafka's order; `keep_results: false` keeps
    /// none (see [`ReplicaResults`]).
    fn replica_state_changes_by_broker(
        &mut self,
        by_broker: &[Replica],
        target: ReplicaState,
        keep_results: bool,
    ) -> Result<Vec<(Replica, ReplicaOutcome)>, Failure> {
        if by_broker.is_empty() {
            return Ok(Vec::new());
        }
        // An UpdateMetadata entry per partition at most, and a failover has three replicas each.
        self.batch
            .reserve(by_broker.len().min(self.ctx.partition_count()));
        let mut results = ReplicaResults {
            items: Vec::new(),
            keep: keep_results,
        };
        let attempt = (|| -> Result<(), Failure> {
            self.new_batch()?;
            let groups: Vec<&[Replica]> = by_broker.chunk_by(|x, y| x.1 == y.1).collect();
            let brokers: Vec<BrokerId> = groups.iter().map(|group| group[0].1).collect();
            let mut assignments_grew = false;
            for broker in kafka_broker_order(&brokers) {
                let at = brokers
                    .binary_search(&broker)
                    .expect("a broker of the groups");
                self.do_replica_state_changes(
                    broker,
                    groups[at],
                    target,
                    &mut results,
                    &mut assignments_grew,
                )?;
            }
            self.send();
            Ok(())
        })();
        match attempt {
            Err(e) if e.kind == FailureKind::ControllerMoved => Err(e),
            _ => Ok(results.items),
        }
    }

    fn do_replica_state_changes(
        &mut self,
        broker: BrokerId,
        replicas: &[Replica],
        target: ReplicaState,
        results: &mut ReplicaResults,
        assignments_grew: &mut bool,
    ) -> Result<(), Failure> {
        // One pass: a replica's check reads only its own state (the replicas are distinct).
        let mut valid = Vec::with_capacity(replicas.len());
        for &(p, b) in replicas {
            let state = self.ctx.replica_state(p, b).unwrap_or_else(|| {
                self.ctx.put_replica_state(p, b, ReplicaState::NonExistent);
                ReplicaState::NonExistent
            });
            if target.valid_previous_states().contains(&state) {
                valid.push((p, b));
            } else {
                self.log_invalid_replica_transition((p, b), target);
            }
        }
        match target {
            ReplicaState::New => self.become_new_replica(broker, &valid, results),
            ReplicaState::Online => {
                self.become_online_replica(broker, &valid, results, assignments_grew);
            }
            ReplicaState::Offline => return self.become_offline_replica(broker, &valid, results),
            _ => {
                for r in valid {
                    self.transition(r, target);
                    if target == ReplicaState::DeletionStarted {
                        self.batch.add_stop_replica(self.ctx, &[broker], r.0, true);
                    }
                    results.push(r, Ok(target));
                }
            }
        }
        Ok(())
    }

    fn replica_state(&self, (p, b): Replica) -> ReplicaState {
        self.ctx
            .replica_state(p, b)
            .unwrap_or(ReplicaState::NonExistent)
    }

    fn replica_name(&self, (p, b): Replica) -> String {
        format!(
            "[Topic={},Partition={},Replica={b}]",
            self.ctx.topic_name(self.ctx.partition_topic(p)),
            self.ctx.partition_id(p)
        )
    }

    /// Record a successful transition (NonExistentReplica also drops the replica from the assignment).
    fn transition(&mut self, r: Replica, target: ReplicaState) {
        let (p, b) = r;
        if self.log.enabled(Level::Trace) {
            let text = Text::ReplicaChanged {
                topic: self.ctx.topic_name_arc(self.ctx.partition_topic(p)),
                partition: self.ctx.partition_id(p),
                broker: b,
                from: self.replica_state(r),
                to: target,
            };
            self.log.push(Level::Trace, text);
        }
        if target == ReplicaState::NonExistent {
            let assignment = self.ctx.assignment(p).remove_replica(b);
            self.ctx.update_assignment(p, &assignment);
            self.ctx.remove_replica_state(p, b);
        } else {
            self.ctx.put_replica_state(p, b, target);
        }
    }

    fn become_new_replica(
        &mut self,
        broker: BrokerId,
        replicas: &[Replica],
        results: &mut ReplicaResults,
    ) {
        for &r in replicas {
            let p = r.0;
            if let Some(lice) = self.ctx.leadership(p) {
                if lice.leader_and_isr.leader == broker {
                    let error = Failure::state_change_failed(format!(
                        "Replica {broker} for partition {} cannot be moved to NewReplica state as it is being requested to become leader",
                        self.ctx.tp_name(p)
                    ));
                    // Kafka names OfflineReplica as the target in this message; kept for parity.
                    let current = self.replica_state(r);
                    self.log_failed_replica(r, current, ReplicaState::Offline, &error);
                    results.push(r, Err(error));
                    continue;
                }
                self.batch
                    .add_leader_and_isr_assigned(self.ctx, &[broker], p, &lice, true);
            }
            self.transition(r, ReplicaState::New);
            results.push(r, Ok(ReplicaState::New));
        }
    }

    /// `assignments_grew`: whether this call (of [`Self::handle_replica_state_changes`]) grew an
    /// assignment yet, which makes the batch's UpdateMetadata entries possibly stale. A broker's
    /// replicas (distinct) are the only ones this call adds to its LeaderAndIsr request.
    fn become_online_replica(
        &mut self,
        broker: BrokerId,
        replicas: &[Replica],
        results: &mut ReplicaResults,
        assignments_grew: &mut bool,
    ) {
        let is_new = |m: &Self, r: Replica| m.replica_state(r) == ReplicaState::New;
        if !*assignments_grew && !replicas.iter().any(|r| is_new(self, *r)) {
            // Nothing the requests read changes in this group (a failover's every group), so its
            // entries go in as one run.
            let parts: Vec<Part> = replicas.iter().map(|(p, _)| *p).collect();
            self.batch
                .add_leader_and_isr_unchanged(self.ctx, broker, &parts);
            for &r in replicas {
                self.transition(r, ReplicaState::Online);
            }
        } else {
            for &r in replicas {
                let p = r.0;
                if is_new(self, r) {
                    if !self.ctx.replicas(p).contains(&broker) {
                        let mut grown = self.ctx.assignment(p);
                        grown.replicas.push(broker);
                        self.ctx.update_assignment(p, &grown);
                        *assignments_grew = true;
                    }
                } else if !*assignments_grew {
                    // Until an assignment grows, this call changes nothing the requests read.
                    self.batch
                        .add_leader_and_isr_unchanged(self.ctx, broker, &[p]);
                } else if let Some(lice) = self.ctx.leadership(p) {
                    self.batch
                        .add_leader_and_isr_assigned(self.ctx, &[broker], p, &lice, false);
                }
                self.transition(r, ReplicaState::Online);
            }
        }
        if results.keep {
            results
                .items
                .extend(replicas.iter().map(|r| (*r, Ok(ReplicaState::Online))));
        }
    }

    fn become_offline_replica(
        &mut self,
        broker: BrokerId,
        replicas: &[Replica],
        results: &mut ReplicaResults,
    ) -> Result<(), Failure> {
        let parts: Vec<Part> = replicas.iter().map(|(p, _)| *p).collect();
        self.batch
            .add_stop_replicas(self.ctx, broker, &parts, false);
        let (mut with, mut without): (Vec<Part>, Vec<Replica>) =
            (Vec::with_capacity(parts.len()), Vec::new());
        for &(p, b) in replicas {
            if self.ctx.has_leadership(p) {
                with.push(p);
            } else {
                without.push((p, b));
            }
        }
        let (updated, failures) = self.remove_replica_from_isr(broker, &with)?;
        for (p, error) in failures {
            let r = (p, broker);
            let current = self.replica_state(r);
            self.log_failed_replica(r, current, ReplicaState::Offline, &error);
            results.push(r, Err(error));
        }
        let mut requests = Vec::with_capacity(updated.len());
        for (p, lice) in updated {
            if self.log.enabled(Level::Info) {
                let line = format!(
                    "Partition {} state changed to {lice} after removing replica {broker} from the ISR as part of transition to OfflineReplica",
                    self.ctx.tp_name(p)
                );
                self.log.push(Level::Info, line);
            }
            if !self
                .ctx
                .is_topic_idx_queued_up_for_deletion(self.ctx.partition_topic(p))
            {
                let recipients: Brokers = self
                    .ctx
                    .replicas(p)
                    .iter()
                    .copied()
                    .filter(|r| *r != broker)
                    .collect();
                requests.push((p, recipients, lice));
            }
            self.transition((p, broker), ReplicaState::Offline);
            results.push((p, broker), Ok(ReplicaState::Offline));
        }
        // Nothing the requests read changes in the transitions: they go in as one run.
        self.batch.add_leader_and_isr_run(self.ctx, &requests);
        for r in without {
            self.transition(r, ReplicaState::Offline);
            self.batch
                .add_update_metadata_for_registered(self.ctx, &[r.0]);
            results.push(r, Ok(ReplicaState::Offline));
        }
        Ok(())
    }

    /// Take `broker` out of the stored ISRs (never emptying one), retrying partitions whose state
    /// changed concurrently; returns the states now cached (input order) and the failures.
    #[allow(clippy::type_complexity)]
    fn remove_replica_from_isr(
        &mut self,
        broker: BrokerId,
        parts: &[Part],
    ) -> Result<
        (
            Vec<(Part, LeaderIsrAndControllerEpoch)>,
            Vec<(Part, Failure)>,
        ),
        Failure,
    > {
        // Each partition's new state lands at its input position: retries and unchanged states
        // finish out of order, and the results go back in input order.
        let mut updated: Vec<Option<LeaderIsrAndControllerEpoch>> = vec![None; parts.len()];
        let mut failures: Vec<(Part, Failure)> = Vec::new();
        let mut remaining: Vec<(usize, Part)> = parts.iter().copied().enumerate().collect();
        // The first pass may start from cached states; a retry reads, as Kafka's every pass.
        let mut cache = true;
        while !remaining.is_empty() {
            remaining = self.do_remove_replica_from_isr(
                broker,
                &remaining,
                &mut updated,
                &mut failures,
                cache,
            )?;
            cache = false;
        }
        let updated = parts
            .iter()
            .zip(updated)
            .filter_map(|(p, lice)| lice.map(|lice| (*p, lice)))
            .collect();
        Ok((updated, failures))
    }

    /// One pass of [`Self::remove_replica_from_isr`] over `(input position, partition)`s; returns
    /// those to retry.
    fn do_remove_replica_from_isr(
        &mut self,
        broker: BrokerId,
        items: &[(usize, Part)],
        updated: &mut [Option<LeaderIsrAndControllerEpoch>],
        failures: &mut Vec<(Part, Failure)>,
        cache: bool,
    ) -> Result<Vec<(usize, Part)>, Failure> {
        let parts: Vec<Part> = items.iter().map(|(_, p)| *p).collect();
        // A cached state stands in where it makes a write: no newer controller's, `broker` in its ISR.
        let stands_in = |m: &Self, _: Part, lice: &LeaderIsrAndControllerEpoch| {
            lice.controller_epoch <= m.ctx.epoch && lice.leader_and_isr.isr.contains(&broker)
        };
        let reads = match self.read_or_cached(&parts, cache, stands_in) {
            Ok(reads) => reads,
            Err(e) => {
                failures.extend(parts.iter().map(|p| (*p, e.clone())));
                return Ok(Vec::new());
            }
        };
        let mut unchanged: Vec<(usize, Part, LeaderAndIsr)> = Vec::new();
        let mut adjusted: Vec<(Part, LeaderAndIsr)> = Vec::new();
        let mut adjusted_at: Vec<usize> = Vec::new();
        for (&(at, p), read) in items.iter().zip(reads) {
            let lice = match read {
                Read::Failed(e) => {
                    failures.push((p, e));
                    continue;
                }
                Read::Missing => {
                    if !self
                        .ctx
                        .is_topic_idx_queued_up_for_deletion(self.ctx.partition_topic(p))
                    {
                        failures.push((
                            p,
                            Failure::state_change_failed(format!(
                                "Failed to change state of replica {broker} for partition {} since the leader and isr path in zookeeper is empty",
                                self.ctx.tp_name(p)
                            )),
                        ));
                    }
                    continue;
                }
                Read::Found(lice) => lice,
            };
            if lice.controller_epoch > self.ctx.epoch {
                failures.push((
                    p,
                    Failure::state_change_failed(format!(
                        "Leader and isr path written by another controller. This probably means the current controller with epoch {} went through a soft failure and another controller was elected with epoch {}. Aborting state change by this controller",
                        self.ctx.epoch, lice.controller_epoch
                    )),
                ));
                continue;
            }
            let lai = lice.leader_and_isr;
            if !lai.isr.contains(&broker) {
                unchanged.push((at, p, lai));
                continue;
            }
            let leader = if lai.leader == broker {
                NO_LEADER
            } else {
                lai.leader
            };
            let isr = if lai.isr.len() == 1 {
                lai.isr.clone()
            } else {
                lai.isr.iter().copied().filter(|r| *r != broker).collect()
            };
            adjusted.push((p, lai.new_leader_and_isr(leader, isr)));
            adjusted_at.push(at);
        }
        let outcome =
            self.store
                .update_states(self.ctx, &adjusted, self.ctx.epoch, self.fence())?;
        failures.extend(outcome.failed);
        let position = Positions::new(&adjusted, &adjusted_at);
        let written = outcome
            .successful
            .into_iter()
            .map(|(p, lai)| (position.of(p), p, lai));
        for (at, p, lai) in unchanged.into_iter().chain(written) {
            let lice = LeaderIsrAndControllerEpoch {
                leader_and_isr: lai,
                controller_epoch: self.ctx.epoch,
            };
            self.ctx.put_leadership(p, &lice);
            updated[at] = Some(lice);
        }
        Ok(outcome
            .to_retry
            .into_iter()
            .map(|p| (position.of(p), p))
            .collect())
    }

    fn log_invalid_replica_transition(&mut self, r: Replica, target: ReplicaState) {
        let current = self.replica_state(r);
        let valid: Vec<&str> = target
            .valid_previous_states()
            .iter()
            .map(|s| s.kafka_name())
            .collect();
        let error = Failure::new(
            FailureKind::IllegalState,
            format!(
                "Replica {} should be in the {} states before moving to {target} state. Instead it is in {current} state",
                self.replica_name(r),
                valid.join(",")
            ),
        );
        self.log_failed_replica(r, current, target, &error);
    }

    fn log_failed_replica(
        &mut self,
        (p, b): Replica,
        current: ReplicaState,
        target: ReplicaState,
        error: &Failure,
    ) {
        let line = format!(
            "Controller {} epoch {} initiated state change of replica {b} for partition {} from {current} to {target} failed: {}",
            self.controller_id,
            self.ctx.epoch,
            self.ctx.tp_name(p),
            error.describe()
        );
        self.log.push(Level::Error, line);
    }
}

/// The input positions of the partitions given to a bulk update, for the partitions it returns:
/// found by walking forward while the store answers in the order it was asked (the memory store
/// does), by lookup otherwise.
struct Positions<'a> {
    asked: &'a [(Part, LeaderAndIsr)],
    at: &'a [usize],
    next: std::cell::Cell<usize>,
    index: std::cell::OnceCell<HashMap<Part, usize>>,
}

impl<'a> Positions<'a> {
    fn new(asked: &'a [(Part, LeaderAndIsr)], at: &'a [usize]) -> Self {
        Self {
            asked,
            at,
            next: std::cell::Cell::new(0),
            index: std::cell::OnceCell::new(),
        }
    }

    /// The position of `p`, one of the partitions asked.
    fn of(&self, p: Part) -> usize {
        self.find(p).expect("one of the partitions asked")
    }

    /// The position of `p`, None when it was not asked.
    fn find(&self, p: Part) -> Option<usize> {
        let start = self.next.get();
        if let Some(offset) = self.asked[start..]
            .iter()
            .take(8)
            .position(|(q, _)| *q == p)
        {
            self.next.set(start + offset + 1);
            return Some(self.at[start + offset]);
        }
        let index = self.index.get_or_init(|| {
            self.asked
                .iter()
                .zip(self.at)
                .map(|((q, _), at)| (*q, *at))
                .collect()
        });
        index.get(&p).copied()
    }
}

fn all_failed(parts: &[Part], e: &Failure) -> Vec<(Part, Outcome)> {
    parts.iter().map(|p| (*p, Err(e.clone()))).collect()
}

/// The order Kafka's replica state machine visits `brokers` in: it groups a transition's replicas
/// by broker with Scala 2.13's `groupBy`, an immutable HashMap (a CHAMP trie), and iterates it.
/// At each level of the trie (five bits of the improved hash, lowest first) the keys alone in
/// their slot come first, in slot order, then the slots holding several keys, each ordered the
/// same way on the next five bits. The reference engine's `kafka_broker_order` is the same.
pub fn kafka_broker_order(brokers: &[BrokerId]) -> Vec<BrokerId> {
    fn improve(key: BrokerId) -> u32 {
        // scala.collection.Hashing.improve of an Int's hash (the Int itself)
        let mut h = key as u32;
        h = h.wrapping_add(!(h << 9));
        h ^= h >> 14;
        h = h.wrapping_add(h << 4);
        h ^ (h >> 10)
    }
    fn visit(entries: &mut [(u32, BrokerId)], shift: u32, out: &mut Vec<BrokerId>) {
        let slot = |h: u32| (h >> shift) & 31;
        entries.sort_by_key(|&(h, _)| slot(h));
        for group in entries.chunk_by(|a, b| slot(a.0) == slot(b.0)) {
            if group.len() == 1 {
                out.push(group[0].1);
            }
        }
        for group in entries.chunk_by_mut(|a, b| slot(a.0) == slot(b.0)) {
            if group.len() > 1 {
                visit(group, shift + 5, out);
            }
        }
    }
    let mut entries: Vec<(u32, BrokerId)> = brokers.iter().map(|&b| (improve(b), b)).collect();
    entries.sort_unstable_by_key(|&(_, b)| b);
    entries.dedup_by_key(|e| e.1);
    let mut out = Vec::with_capacity(entries.len());
    visit(&mut entries, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    //! Both state machines against Kafka's transition tables (reference §3.1, §4.1) and the
    //! transition actions of §3.3 and §4.3, over an in-memory store.

    use super::*;
    use crate::context::TopicIdx;
    use crate::model::ReplicaAssignment;
    use crate::store::Updated;

    /// Partition states with their versions, `/controller_epoch`'s version as the fence, and
    /// the bulk calls made.
    #[derive(Default)]
    struct MemStore {
        states: HashMap<Part, LeaderIsrAndControllerEpoch>,
        epoch_version: i32,
        calls: Vec<&'static str>,
        /// An ISR a partition leader writes just before the controller's next update.
        concurrent_isr: Option<Vec<BrokerId>>,
        /// What [`Store::writes_from_cache`] answers.
        from_cache: bool,
        /// Another party's change of the stored states just before the controller's next update.
        concurrent: Option<Change>,
    }

    type States = HashMap<Part, LeaderIsrAndControllerEpoch>;
    type Change = Box<dyn FnOnce(&mut States) + Send>;

    impl MemStore {
        fn fenced(&self, fence: i32) -> Result<(), Failure> {
            if fence == self.epoch_version {
                Ok(())
            } else {
                Err(Failure::new(FailureKind::ControllerMoved, "fenced"))
            }
        }
    }

    impl Store for MemStore {
        fn read_states(&mut self, _ctx: &Context, parts: &[Part]) -> Result<Vec<Read>, Failure> {
            self.calls.push("read");
            Ok(parts
                .iter()
                .map(|p| {
                    self.states
                        .get(p)
                        .map_or(Read::Missing, |s| Read::Found(s.clone()))
                })
                .collect())
        }

        fn create_states(
            &mut self,
            _ctx: &Context,
            states: &[(Part, LeaderIsrAndControllerEpoch)],
            fence: i32,
        ) -> Result<Vec<Option<Failure>>, Failure> {
            self.calls.push("create");
            self.fenced(fence)?;
            Ok(states
                .iter()
                .map(|(p, state)| {
                    if self.states.contains_key(p) {
                        return Some(Failure::new(FailureKind::Other, "node exists"));
                    }
                    self.states.insert(*p, state.clone());
                    None
                })
                .collect())
        }

        fn update_states(
            &mut self,
            _ctx: &Context,
            updates: &[(Part, LeaderAndIsr)],
            controller_epoch: i32,
            fence: i32,
        ) -> Result<Updated, Failure> {
            self.calls.push("update");
            self.fenced(fence)?;
            if let Some(change) = self.concurrent.take() {
                change(&mut self.states);
            }
            if let Some(isr) = self.concurrent_isr.take() {
                for stored in self.states.values_mut() {
                    let lai = &mut stored.leader_and_isr;
                    lai.isr = isr.as_slice().into();
                    lai.partition_epoch += 1;
                }
            }
            let mut updated = Updated::default();
            for (p, lai) in updates {
                match self.states.get_mut(p) {
                    None => updated
                        .failed
                        .push((*p, Failure::new(FailureKind::NoNode, "no node"))),
                    Some(stored)
                        if stored.leader_and_isr.partition_epoch != lai.partition_epoch =>
                    {
                        updated.to_retry.push(*p);
                    }
                    Some(stored) => {
                        let mut written = lai.clone();
                        written.partition_epoch += 1;
                        *stored = LeaderIsrAndControllerEpoch {
                            leader_and_isr: written.clone(),
                            controller_epoch,
                        };
                        updated.successful.push((*p, written));
                    }
                }
            }
            Ok(updated)
        }

        fn unclean_overrides(
            &mut self,
            _ctx: &Context,
            topics: &[TopicIdx],
        ) -> Result<Vec<Result<Option<String>, Failure>>, Failure> {
            self.calls.push("configs");
            Ok(topics.iter().map(|_| Ok(None)).collect())
        }

        fn writes_from_cache(&self) -> bool {
            self.from_cache
        }
    }

    /// A controller (id 1, epoch 5) whose brokers 1, 2 and 3 are live, with partition `t-0`
    /// assigned to `[1, 2, 3]`.
    struct Cluster {
        ctx: Context,
        batch: RequestBatch,
        store: MemStore,
        log: Log,
        sent: Vec<Sent>,
        p: Part,
    }

    impl Cluster {
        fn new() -> Self {
            let mut ctx = Context::new();
            ctx.epoch = 5;
            ctx.set_live_brokers(&[(1, 10), (2, 20), (3, 30)]);
            let p = ctx.intern_part("t", 0);
            ctx.update_assignment(
                p,
                &ReplicaAssignment {
                    replicas: [1, 2, 3].as_slice().into(),
                    ..ReplicaAssignment::default()
                },
            );
            Self {
                ctx,
                batch: RequestBatch::default(),
                store: MemStore::default(),
                log: Log {
                    info: true,
                    ..Log::default()
                },
                sent: Vec::new(),
                p,
            }
        }

        /// `t-0` led by `leader` with `isr`, stored and cached.
        fn led(&mut self, leader: BrokerId, isr: &[BrokerId]) {
            let state = LeaderIsrAndControllerEpoch {
                leader_and_isr: LeaderAndIsr::new(leader, isr.into()),
                controller_epoch: self.ctx.epoch,
            };
            self.store.states.insert(self.p, state.clone());
            self.ctx.put_leadership(self.p, &state);
        }

        fn machine(&mut self) -> Machine<'_> {
            Machine {
                controller_id: 1,
                ctx: &mut self.ctx,
                batch: &mut self.batch,
                store: &mut self.store,
                log: &mut self.log,
                sent: &mut self.sent,
                stop_replica_version: 1,
                leader_recovery: false,
                unclean_default: false,
            }
        }

        fn partitions(
            &mut self,
            target: PartitionState,
            election: Option<Strategy>,
        ) -> Result<Vec<(Part, Outcome)>, Failure> {
            let p = self.p;
            self.machine().handle_partition_state_changes(
                &[p],
                target,
                election,
                &mut KafkaSelector,
            )
        }

        fn replicas(
            &mut self,
            broker: BrokerId,
            target: ReplicaState,
        ) -> Result<Vec<(Replica, ReplicaOutcome)>, Failure> {
            let p = self.p;
            self.machine()
                .handle_replica_state_changes(&[(p, broker)], target)
        }

        fn errors(&self) -> Vec<Cow<'_, str>> {
            self.log
                .lines
                .iter()
                .filter(|l| l.level == Level::Error)
                .map(|l| l.text.made())
                .collect()
        }

        /// A refused transition: nothing sent, one error naming the valid states and `from`.
        fn assert_refused(&self, case: &str, names: &str, from: impl std::fmt::Display) {
            assert!(self.sent.is_empty(), "{case}");
            let errors = self.errors();
            assert_eq!(errors.len(), 1, "{case}");
            assert!(
                errors[0].contains(&format!("IllegalStateError: {names}"))
                    && errors[0].ends_with(&format!("Instead it is in {from} state")),
                "{case}: {}",
                errors[0]
            );
        }

        /// `(broker, is_new, leader, isr)` of each LeaderAndIsr sent.
        fn leader_and_isr_sent(&self) -> Vec<(BrokerId, bool, BrokerId, Vec<BrokerId>)> {
            self.sent
                .iter()
                .flat_map(|s| match s {
                    Sent::LeaderAndIsr {
                        broker, entries, ..
                    } => entries
                        .iter()
                        .map(|e| (*broker, e.is_new, e.leader, e.isr.to_vec()))
                        .collect(),
                    _ => Vec::new(),
                })
                .collect()
        }

        /// `(broker, delete)` of each StopReplica entry sent.
        fn stop_replica_sent(&self) -> Vec<(BrokerId, bool)> {
            self.sent
                .iter()
                .flat_map(|s| match s {
                    Sent::StopReplica {
                        broker, entries, ..
                    } => entries.iter().map(|e| (*broker, e.delete)).collect(),
                    _ => Vec::new(),
                })
                .collect()
        }
    }

    /// Reference §3.1, written out independently of `PartitionState::valid_previous_states`.
    /// Each line's text, in order.
    fn texts(log: &Log) -> Vec<String> {
        log.lines
            .iter()
            .map(|l| l.text.made().into_owned())
            .collect()
    }

    fn kafka_partition_transition(from: PartitionState, to: PartitionState) -> bool {
        use PartitionState::*;
        matches!(
            (from, to),
            (NonExistent, New)
                | (New | Online | Offline, Online)
                | (New | Online | Offline, Offline)
                | (Offline, NonExistent)
        )
    }

    /// Reference §4.1, likewise.
    fn kafka_replica_transition(from: ReplicaState, to: ReplicaState) -> bool {
        use ReplicaState::*;
        matches!(
            (from, to),
            (NonExistent, New)
                | (New | Online | Offline | DeletionIneligible, Online)
                | (New | Online | Offline | DeletionIneligible, Offline)
                | (Offline, DeletionStarted)
                | (DeletionStarted, DeletionSuccessful)
                | (Offline | DeletionStarted, DeletionIneligible)
                | (DeletionSuccessful, NonExistent)
        )
    }

    #[test]
    fn every_partition_transition_is_taken_or_refused_as_kafka_does() {
        for from in PartitionState::ALL {
            for to in PartitionState::ALL {
                let mut cluster = Cluster::new();
                if matches!(from, PartitionState::Online | PartitionState::Offline) {
                    cluster.led(2, &[2, 3]);
                }
                if from != PartitionState::NonExistent {
                    cluster.ctx.put_partition_state(cluster.p, from);
                }
                let results = cluster
                    .partitions(
                        to,
                        Some(Strategy::Offline {
                            allow_unclean: false,
                        }),
                    )
                    .expect("no controller move");
                let case = format!("{from} -> {to}");
                if kafka_partition_transition(from, to) {
                    assert_eq!(cluster.ctx.partition_state(cluster.p), to, "{case}");
                    assert!(
                        cluster.errors().is_empty(),
                        "{case}: {:?}",
                        cluster.errors()
                    );
                    // Only elections (Online/Offline -> Online) have results (§3.2).
                    let elected = to == PartitionState::Online && from != PartitionState::New;
                    assert_eq!(results.len(), usize::from(elected), "{case}");
                } else {
                    assert_eq!(cluster.ctx.partition_state(cluster.p), from, "{case}");
                    assert!(results.is_empty(), "{case}");
                    assert!(
                        cluster.store.calls.is_empty(),
                        "{case}: {:?}",
                        cluster.store.calls
                    );
                    cluster.assert_refused(&case, "Partition t-0 should be in one of", from);
                }
            }
        }
    }

    #[test]
    fn new_to_online_creates_the_state_from_the_live_replicas() {
        let mut cluster = Cluster::new();
        cluster.ctx.remove_live_brokers(&[1]);
        cluster
            .ctx
            .put_partition_state(cluster.p, PartitionState::New);
        cluster.partitions(PartitionState::Online, None).unwrap();
        let stored = &cluster.store.states[&cluster.p];
        assert_eq!(stored.leader_and_isr.leader, 2);
        assert_eq!(stored.leader_and_isr.isr.as_slice(), &[2, 3]);
        assert_eq!(stored.controller_epoch, 5);
        assert_eq!(
            cluster.leader_and_isr_sent(),
            vec![(2, true, 2, vec![2, 3]), (3, true, 2, vec![2, 3])],
            "LeaderAndIsr to the ISR members, isNew"
        );
        assert_eq!(
            cluster.ctx.partition_state(cluster.p),
            PartitionState::Online
        );
    }

    #[test]
    fn a_creations_lines_are_made_when_read_as_they_were_made_at_once() {
        let mut cluster = Cluster::new();
        cluster.log.trace = true;
        cluster.partitions(PartitionState::New, None).unwrap();
        cluster.replicas(2, ReplicaState::New).unwrap();
        cluster.replicas(2, ReplicaState::Online).unwrap();
        let lines: Vec<(Level, String)> = cluster
            .log
            .lines
            .iter()
            .map(|l| (l.level, l.text.made().into_owned()))
            .collect();
        assert_eq!(
            lines,
            [
                (Level::Info, "Changed partition t-0 state from NonExistentPartition to NewPartition with assigned replicas 1,2,3"),
                (Level::Trace, "Changed state of replica 2 for partition t-0 from NonExistentReplica to NewReplica"),
                (Level::Trace, "Changed state of replica 2 for partition t-0 from NewReplica to OnlineReplica"),
            ]
            .map(|(level, text)| (level, text.to_owned()))
        );
        assert!(
            !matches!(cluster.log.lines[1].text, Text::Made(_)),
            "kept as the transition's data"
        );
    }

    #[test]
    fn new_to_online_without_a_live_replica_stays_new() {
        let mut cluster = Cluster::new();
        cluster.ctx.remove_live_brokers(&[1, 2, 3]);
        cluster
            .ctx
            .put_partition_state(cluster.p, PartitionState::New);
        cluster.partitions(PartitionState::Online, None).unwrap();
        assert_eq!(cluster.ctx.partition_state(cluster.p), PartitionState::New);
        assert!(cluster.store.states.is_empty());
        let errors = cluster.errors();
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].ends_with("No assigned replica is alive."),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn an_election_needs_a_strategy() {
        let mut cluster = Cluster::new();
        cluster.led(2, &[2, 3]);
        cluster
            .ctx
            .put_partition_state(cluster.p, PartitionState::Offline);
        let results = cluster.partitions(PartitionState::Online, None).unwrap();
        assert_eq!(results.len(), 1);
        let error = results[0].1.as_ref().unwrap_err();
        assert_eq!(error.kind, FailureKind::IllegalArgument);
        assert_eq!(
            cluster.ctx.partition_state(cluster.p),
            PartitionState::Offline
        );
        assert!(cluster.sent.is_empty());
    }

    #[test]
    fn an_offline_election_retries_after_a_concurrent_isr_change() {
        let mut cluster = Cluster::new();
        cluster.led(1, &[1, 2]);
        cluster.ctx.remove_live_brokers(&[1]);
        cluster
            .ctx
            .put_partition_state(cluster.p, PartitionState::Offline);
        // Between the controller's read and its write the leader writes ISR [1, 3]: the write
        // fails on the version (BADVERSION), the partition is read again and elected again.
        cluster.store.concurrent_isr = Some(vec![1, 3]);
        let results = cluster
            .partitions(
                PartitionState::Online,
                Some(Strategy::Offline {
                    allow_unclean: false,
                }),
            )
            .unwrap();
        let rounds: Vec<&str> = cluster
            .store
            .calls
            .iter()
            .copied()
            .filter(|c| *c != "configs")
            .collect();
        assert_eq!(rounds, ["read", "update", "read", "update"]);
        let elected = results[0].1.as_ref().unwrap();
        assert_eq!((elected.leader, elected.leader_epoch), (3, 1));
        assert_eq!(elected.isr.as_slice(), &[3]);
        assert_eq!(cluster.store.states[&cluster.p].leader_and_isr, *elected);
        assert_eq!(
            cluster.ctx.leadership(cluster.p).unwrap().leader_and_isr,
            *elected
        );
        assert_eq!(
            cluster.ctx.partition_state(cluster.p),
            PartitionState::Online
        );
    }

    #[test]
    fn a_moved_controller_fails_the_call_and_sends_nothing() {
        let mut cluster = Cluster::new();
        cluster.store.epoch_version = 7;
        cluster
            .ctx
            .put_partition_state(cluster.p, PartitionState::New);
        let error = cluster
            .partitions(PartitionState::Online, None)
            .unwrap_err();
        assert_eq!(error.kind, FailureKind::ControllerMoved);
        assert!(cluster.sent.is_empty());
        assert_eq!(cluster.ctx.partition_state(cluster.p), PartitionState::New);
    }

    #[test]
    fn every_replica_transition_is_taken_or_refused_as_kafka_does() {
        for from in ReplicaState::ALL {
            for to in ReplicaState::ALL {
                let mut cluster = Cluster::new();
                if from != ReplicaState::NonExistent {
                    cluster.ctx.put_replica_state(cluster.p, 2, from);
                }
                let results = cluster.replicas(2, to).expect("no controller move");
                let case = format!("{from} -> {to}");
                if kafka_replica_transition(from, to) {
                    let expected = (to != ReplicaState::NonExistent).then_some(to);
                    assert_eq!(cluster.ctx.replica_state(cluster.p, 2), expected, "{case}");
                    assert!(
                        cluster.errors().is_empty(),
                        "{case}: {:?}",
                        cluster.errors()
                    );
                    assert_eq!(results.len(), 1, "{case}");
                    assert_eq!(results[0].1.as_ref().ok(), Some(&to), "{case}");
                } else {
                    let kept = cluster.ctx.replica_state(cluster.p, 2);
                    assert_eq!(kept, Some(from), "{case}: registered, state unchanged");
                    assert!(results.is_empty(), "{case}");
                    cluster.assert_refused(
                        &case,
                        "Replica [Topic=t,Partition=0,Replica=2] should be in the",
                        from,
                    );
                }
            }
        }
    }

    #[test]
    fn a_new_replica_cannot_be_the_cached_leader() {
        let mut cluster = Cluster::new();
        cluster.led(2, &[2, 3]);
        let results = cluster.replicas(2, ReplicaState::New).unwrap();
        assert_eq!(
            results[0].1.as_ref().unwrap_err().kind,
            FailureKind::StateChangeFailed
        );
        assert_eq!(
            cluster.ctx.replica_state(cluster.p, 2),
            Some(ReplicaState::NonExistent)
        );
        let results = cluster.replicas(3, ReplicaState::New).unwrap();
        assert_eq!(results[0].1.as_ref().ok(), Some(&ReplicaState::New));
        assert_eq!(
            cluster.leader_and_isr_sent(),
            vec![(3, true, 2, vec![2, 3])]
        );
    }

    #[test]
    fn an_offline_replica_leaves_the_isr_but_never_empties_it() {
        let mut cluster = Cluster::new();
        cluster.led(2, &[2, 3]);
        cluster
            .ctx
            .put_replica_state(cluster.p, 2, ReplicaState::Online);
        cluster.replicas(2, ReplicaState::Offline).unwrap();
        let stored = &cluster.store.states[&cluster.p].leader_and_isr;
        assert_eq!(
            (stored.leader, stored.isr.as_slice()),
            (NO_LEADER, &[3][..])
        );
        assert_eq!(stored.leader_epoch, 1);
        assert_eq!(cluster.stop_replica_sent(), vec![(2, false)]);
        assert_eq!(
            cluster.leader_and_isr_sent(),
            vec![
                (1, false, NO_LEADER, vec![3]),
                (3, false, NO_LEADER, vec![3])
            ],
            "LeaderAndIsr to the other assigned replicas"
        );
        assert_eq!(
            cluster.ctx.replica_state(cluster.p, 2),
            Some(ReplicaState::Offline)
        );

        cluster.sent.clear();
        cluster
            .ctx
            .put_replica_state(cluster.p, 3, ReplicaState::Online);
        cluster.replicas(3, ReplicaState::Offline).unwrap();
        let stored = &cluster.store.states[&cluster.p].leader_and_isr;
        assert_eq!(stored.isr.as_slice(), &[3], "a single-member ISR is kept");
    }

    #[test]
    fn deletion_stops_the_replica_and_non_existent_drops_it_from_the_assignment() {
        let mut cluster = Cluster::new();
        cluster
            .ctx
            .put_replica_state(cluster.p, 2, ReplicaState::Offline);
        cluster.replicas(2, ReplicaState::DeletionStarted).unwrap();
        assert_eq!(cluster.stop_replica_sent(), vec![(2, true)]);
        cluster
            .replicas(2, ReplicaState::DeletionSuccessful)
            .unwrap();
        cluster.replicas(2, ReplicaState::NonExistent).unwrap();
        assert_eq!(cluster.ctx.replicas(cluster.p), &[1, 3]);
        assert_eq!(cluster.ctx.replica_state(cluster.p, 2), None);
    }

    #[test]
    fn brokers_are_visited_in_the_order_of_scalas_hash_map() {
        // As scala-library 2.13.15 iterates `groupBy`'s map of these Int keys.
        assert_eq!(kafka_broker_order(&[1, 2, 3]), [1, 2, 3]);
        assert_eq!(kafka_broker_order(&[3, 4, 5]), [5, 3, 4]);
        assert_eq!(
            kafka_broker_order(&(0..12).collect::<Vec<_>>()),
            [0, 5, 10, 1, 6, 9, 2, 7, 3, 11, 8, 4]
        );
        assert_eq!(
            kafka_broker_order(&[1, 33, 65, 97, 7, 1000, 1001, 1002, 1003]),
            [1001, 1, 33, 1002, 7, 1000, 1003, 65, 97]
        );
    }

    #[test]
    fn replicas_are_grouped_as_deduplicated_and_sorted_stably_by_broker() {
        // Repeats near and far, brokers unordered, negative and large ids, partitions across
        // bit words (a repeat's bit must be cleared for the next broker's group).
        let mut replicas: Vec<Replica> = vec![(5, 2), (70, -1), (5, 2), (1, 9), (64, 2), (0, 2)];
        replicas.extend((0..300).map(|i| ((i * 37) % 130, [3, 2, 1_000_000, -1][i as usize % 4])));
        replicas.extend([(70, -1), (1, 9), (5, 2)]);
        let mut expected = dedupe(&replicas);
        expected.sort_by_key(|(_, b)| *b);
        assert_eq!(group_by_broker(&replicas), expected);
        assert_eq!(group_by_broker(&[]), Vec::<Replica>::new());
        // Ascending by broker then partition (read from the replica index): kept as it is.
        let mut sorted = expected;
        sorted.sort_by_key(|(p, b)| (*b, *p));
        assert!(matches!(group_by_broker(&sorted), Cow::Borrowed(kept) if *kept == sorted[..]));
    }

    #[test]
    fn unread_replica_changes_do_what_read_ones_do() {
        let run = |keep: bool| {
            let mut c = Cluster::new();
            let mut replicas = Vec::new();
            for id in 0..4 {
                let p = c.ctx.intern_part("u", id);
                c.ctx.update_assignment(
                    p,
                    &ReplicaAssignment {
                        replicas: [1, 2, 3].as_slice().into(),
                        ..ReplicaAssignment::default()
                    },
                );
                let leader = 1 + id % 3;
                c.ctx.put_leadership(
                    p,
                    &LeaderIsrAndControllerEpoch {
                        leader_and_isr: LeaderAndIsr::new(leader, [1, 2, 3].as_slice().into()),
                        controller_epoch: 5,
                    },
                );
                replicas.extend([(p, 3), (p, 1), (p, 2), (p, 3)]);
            }
            c.log.trace = true;
            c.log.batch_info = true;
            let mut results = 0;
            // New (the leaders refused), then Online from New and from Online (a failover's).
            for target in [
                ReplicaState::New,
                ReplicaState::Online,
                ReplicaState::Online,
            ] {
                let mut m = c.machine();
                if keep {
                    results += m
                        .handle_replica_state_changes(&replicas, target)
                        .unwrap()
                        .len();
                } else {
                    m.handle_replica_state_changes_unread(&replicas, target)
                        .unwrap();
                }
            }
            let lines = texts(&c.log);
            (results, lines, c.sent.clone())
        };
        let (read, unread) = (run(true), run(false));
        assert_eq!((read.0, unread.0), (12 + 8 + 8, 0));
        assert!(read
            .1
            .iter()
            .any(|l| l.contains("cannot be moved to NewReplica")));
        assert!(
            read.2.len() >= 3 * 2,
            "LeaderAndIsr and UpdateMetadata per call"
        );
        assert_eq!((read.1, read.2), (unread.1, unread.2));
    }

    /// What a call does with cached states standing in for Kafka's reads and another party's
    /// `change` landing after the context got the state, and without them (Kafka's reads) and the
    /// change landing between the read and the write: the store's calls, then everything else
    /// (the stored state, results, lines and requests).
    fn with_and_without_cache(
        change: fn(&mut States, Part),
        call: impl Fn(&mut Cluster) -> String,
    ) -> [(Vec<&'static str>, String); 2] {
        [false, true].map(|from_cache| {
            let mut cluster = Cluster::new();
            cluster.store.from_cache = from_cache;
            cluster.led(3, &[3, 1, 2]);
            cluster.ctx.remove_live_brokers(&[3]);
            for b in [1, 2, 3] {
                cluster
                    .ctx
                    .put_replica_state(cluster.p, b, ReplicaState::Online);
            }
            let p = cluster.p;
            if from_cache {
                change(&mut cluster.store.states, p);
            } else {
                cluster.store.concurrent = Some(Box::new(move |states| change(states, p)));
            }
            let results = call(&mut cluster);
            let calls = std::mem::take(&mut cluster.store.calls)
                .into_iter()
                .filter(|c| *c != "configs") // asked for no topic: every ISR has a live member
                .collect();
            let lines = texts(&cluster.log);
            let done = format!(
                "{:?} {results} {lines:?} {:?} {:?}",
                cluster.store.states.get(&cluster.p),
                cluster.sent,
                cluster.ctx.leadership(cluster.p)
            );
            (calls, done)
        })
    }

    fn offline_replica_and_election(cluster: &mut Cluster) -> String {
        let replicas = cluster.replicas(3, ReplicaState::Offline);
        cluster
            .ctx
            .put_partition_state(cluster.p, PartitionState::Offline);
        let strategy = Strategy::Offline {
            allow_unclean: false,
        };
        let elected = cluster.partitions(PartitionState::Online, Some(strategy));
        format!("{replicas:?} {elected:?}")
    }

    #[test]
    fn cached_states_stand_in_for_reads_and_write_what_reads_would() {
        let [read, cached] = with_and_without_cache(|_, _| {}, offline_replica_and_election);
        assert_eq!(read.0, ["read", "update", "read", "update"]);
        assert_eq!(cached.0, ["update", "update"], "no read");
        assert_eq!(read.1, cached.1);
        assert!(read.1.contains("leader: 1"), "{}", read.1);
    }

    #[test]
    fn a_state_changed_since_it_was_cached_gets_kafkas_outcome() {
        // Another party wrote ISR [3, 2] at version 1 over the cached [3, 1, 2] at 0: the write
        // fails on the version, and the partition is read and written again, as Kafka's is.
        fn shrink(states: &mut States, p: Part) {
            let stored = states.get_mut(&p).unwrap();
            stored.leader_and_isr.isr = [3, 2].as_slice().into();
            stored.leader_and_isr.partition_epoch += 1;
        }
        let [read, cached] = with_and_without_cache(shrink, offline_replica_and_election);
        assert_eq!(
            read.0,
            ["read", "update", "read", "update", "read", "update"]
        );
        assert_eq!(cached.0, ["update", "read", "update", "update"]);
        assert_eq!(read.1, cached.1);
        assert!(read.1.contains("leader: 2"), "{}", read.1);

        // A newer controller's state is never written over: the retry's read aborts.
        fn newer(states: &mut States, p: Part) {
            let stored = states.get_mut(&p).unwrap();
            stored.controller_epoch = 6;
            stored.leader_and_isr.partition_epoch += 1;
        }
        let [read, cached] = with_and_without_cache(newer, offline_replica_and_election);
        assert_eq!(read.1, cached.1);
        for aborted in ["Aborting state change", "Aborted leader election"] {
            assert!(read.1.contains(aborted), "{}", read.1);
        }

        // A deleted state znode fails the write.
        fn delete(states: &mut States, p: Part) {
            states.remove(&p);
        }
        let offline_replica =
            |cluster: &mut Cluster| format!("{:?}", cluster.replicas(3, ReplicaState::Offline));
        let [read, cached] = with_and_without_cache(delete, offline_replica);
        assert_eq!(read.1, cached.1);
        assert!(read.1.contains("no node"), "{}", read.1);
    }
}
