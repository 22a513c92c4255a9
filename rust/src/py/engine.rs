//! `kctl._engine.Engine`: one controller's context, request batches and state machines in native
//! memory. `kctl.native` wraps it in the public `ControllerContext` / state-machine / request-batch
//! API. Partition and replica sets travel as opaque [`Parts`] / [`Replicas`] handles (or as lists of
//! `(topic, partition[, broker])` when they come from Python); results as [`Outcomes`].

use std::borrow::Cow;
use std::sync::Arc;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::context::{Context, Part, Replica};
use crate::election::Strategy;
use crate::hash::{HashMap, HashSet};
use crate::model::{
    BrokerId, Brokers, LeaderAndIsr, LeaderRecoveryState, PartitionState, ReplicaAssignment,
    ReplicaState,
};
use crate::py::classes::classes;
use crate::py::convert::{
    detached, failure_to_err, failure_to_py, leader_and_isr_to_py, state_from_tuple,
    state_to_tuple, StateTuple,
};
use crate::py::payload::{Entries, PartitionStates};
use crate::py::selector::PySelector;
use crate::py::sets::{Outcome, Outcomes, Parts, Replicas, StateChangeLines};
use crate::py::store::{NativeMemory, PyStore};
use crate::py::zookeeper::{NativeZooKeeper, ZkParams};
use crate::requests::{RequestBatch, Sent, UpdateMetadataEntries};
use crate::statemachine::{KafkaSelector, Level, Line, Log, Machine, Selector, Text};
use crate::store::{Failure, Read, Store};

type Tp = (String, i32);
/// `(replicas, adding, removing)`.
type AssignmentTuple = (Brokers, Brokers, Brokers);
/// `(topic, partition, broker)`.
type ReplicaTuple = (String, i32, BrokerId);
/// What a state-machine call returns to Python: `(results, log lines, sent requests)`.
type CallResult<'py> = (Outcomes, StateChangeLines, Bound<'py, PyList>);

/// Options of a state-machine call that come from the controller's config and logger.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct CallOptions {
    controller_id: i32,
    stop_replica_version: i32,
    leader_recovery: bool,
    unclean_default: bool,
    trace: bool,
    info: bool,
    batch_info: bool,
}

#[pyclass(module = "kctl._engine")]
pub struct Engine {
    ctx: Context,
    batches: Vec<RequestBatch>,
}

fn assignment_from_tuple(t: AssignmentTuple) -> ReplicaAssignment {
    ReplicaAssignment {
        replicas: t.0,
        adding: t.1,
        removing: t.2,
    }
}

/// Broker ids from Python, a tuple (what `ReplicaAssignment` holds) read in place.
fn brokers_of(ids: &Bound<'_, PyAny>) -> PyResult<Brokers> {
    match ids.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter_borrowed().map(|id| id.extract()).collect(),
        Err(_) => ids.extract(),
    }
}

fn partition_state(id: u8) -> PyResult<PartitionState> {
    PartitionState::from_id(id)
        .ok_or_else(|| PyValueError::new_err(format!("no partition state {id}")))
}

fn replica_state(id: u8) -> PyResult<ReplicaState> {
    ReplicaState::from_id(id).ok_or_else(|| PyValueError::new_err(format!("no replica state {id}")))
}

fn strategy(spec: Option<(String, bool)>) -> PyResult<Option<Strategy>> {
    Ok(match spec {
        None => None,
        Some((kind, allow_unclean)) => Some(match kind.as_str() {
            "offline" => Strategy::Offline { allow_unclean },
            "reassign" => Strategy::Reassign,
            "preferred" => Strategy::Preferred,
            "controlled_shutdown" => Strategy::ControlledShutdown,
            other => {
                return Err(PyValueError::new_err(format!(
                    "no election strategy {other:?}"
                )))
            }
        }),
    })
}

impl Engine {
    fn owner(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    fn handle(&self, parts: Vec<Part>) -> Parts {
        Parts {
            parts,
            owner: self.owner(),
        }
    }

    /// A query of the context that may take a while, run with the GIL released.
    fn parts_detached(
        &self,
        py: Python<'_>,
        query: impl FnOnce(&Context) -> Vec<Part> + Send,
    ) -> Parts {
        let ctx = &self.ctx;
        self.handle(py.detach(|| query(ctx)))
    }

    fn replica_handle(&self, items: Vec<Replica>) -> Replicas {
        Replicas {
            items,
            owner: self.owner(),
        }
    }

    fn tp(&self, p: Part) -> Tp {
        (
            self.ctx.topic_name(self.ctx.partition_topic(p)).to_owned(),
            self.ctx.partition_id(p),
        )
    }

    fn existing(&self, topic: &str, partition: i32) -> Option<Part> {
        self.ctx.part(topic, partition)
    }

    /// Partitions given as one of this engine's handles (read in place: a new broker's
    /// UpdateMetadata names every partition) or as `(topic, partition)` pairs (interned).
    fn resolve_parts<'a>(&mut self, obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [Part]>> {
        if let Ok(handle) = obj.cast::<Parts>() {
            let handle = handle.get();
            if handle.owner == self.owner() {
                return Ok(Cow::Borrowed(&handle.parts));
            }
        }
        let tps: Vec<Tp> = obj.extract()?;
        Ok(Cow::Owned(
            tps.into_iter()
                .map(|(t, p)| self.ctx.intern_part(&t, p))
                .collect(),
        ))
    }

    /// Replicas given as one of this engine's handles (read in place: a failover's are 3M) or as
    /// `(topic, partition, broker)` triples (interned).
    fn resolve_replicas<'a>(&mut self, obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [Replica]>> {
        if let Ok(handle) = obj.cast::<Replicas>() {
            let handle = handle.get();
            if handle.owner == self.owner() {
                return Ok(Cow::Borrowed(&handle.items));
            }
        }
        let items: Vec<ReplicaTuple> = obj.extract()?;
        Ok(Cow::Owned(
            items
                .into_iter()
                .map(|(t, p, b)| (self.ctx.intern_part(&t, p), b))
                .collect(),
        ))
    }

    /// Run one state-machine call with a Python store and selector: its results as `Outcomes`, the
    /// log lines and the requests it sent; a failure of the whole call (a moved controller) raises.
    /// The GIL is released for the whole call: the store and plugin selectors take it back for
    /// their Python calls, once per bulk operation.
    #[allow(clippy::too_many_arguments)]
    fn run<'py, K: Send, V: Send>(
        &mut self,
        py: Python<'py>,
        slot: usize,
        store: &Bound<'py, PyAny>,
        options: &CallOptions,
        call: impl FnOnce(&mut Machine<'_>) -> Result<Vec<(K, Result<V, Failure>)>, Failure> + Send,
        key: fn(K) -> Replica,
        value: fn(V) -> Outcome,
    ) -> PyResult<CallResult<'py>> {
        if slot >= self.batches.len() {
            return Err(PyKeyError::new_err(format!("no request batch {slot}")));
        }
        let store = StoreRef::of(store);
        let (results, lines, sent) = detached(py, || {
            store.with(|store| {
                let (results, lines, sent) = self.run_on(slot, store, options, call);
                results.map(|results| (results, lines, sent))
            })
        })?;
        let items = results
            .into_iter()
            .map(|(k, result)| (key(k), result.map_or_else(Outcome::Failed, value)))
            .collect();
        let outcomes = Outcomes {
            items,
            owner: self.owner(),
        };
        Ok((outcomes, lines, self.sent_to_py(py, sent)?))
    }

    fn run_on<T>(
        &mut self,
        slot: usize,
        store: &mut (dyn Store + Send),
        options: &CallOptions,
        call: impl FnOnce(&mut Machine<'_>) -> T,
    ) -> (T, StateChangeLines, Vec<Sent>) {
        let mut log = Log {
            lines: Vec::new(),
            trace: options.trace,
            info: options.info,
            batch_info: options.batch_info,
        };
        let mut sent = Vec::new();
        let mut machine = Machine {
            controller_id: options.controller_id,
            ctx: &mut self.ctx,
            batch: &mut self.batches[slot],
            store,
            log: &mut log,
            sent: &mut sent,
            stop_replica_version: options.stop_replica_version,
            leader_recovery: options.leader_recovery,
            unclean_default: options.unclean_default,
        };
        let out = call(&mut machine);
        (out, StateChangeLines { lines: log.lines }, sent)
    }

    fn batch(&mut self, slot: usize) -> PyResult<&mut RequestBatch> {
        self.batches
            .get_mut(slot)
            .ok_or_else(|| PyKeyError::new_err(format!("no request batch {slot}")))
    }

    /// The sent requests as `(kind, broker, broker epoch, states, brokers, delete)` tuples, their
    /// states lazy [`PartitionStates`]; `brokers` is a LeaderAndIsr's live leaders, and an
    /// UpdateMetadata fan-out's recipients (its broker and epoch -1: each recipient's is its own).
    fn sent_to_py<'py>(&self, py: Python<'py>, sent: Vec<Sent>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for s in sent {
            let item = match s {
                Sent::LeaderAndIsr {
                    broker,
                    broker_epoch,
                    entries,
                    live_leaders,
                } => {
                    let states = PartitionStates::new(&self.ctx, Entries::LeaderAndIsr(entries));
                    (
                        "LeaderAndIsr",
                        broker,
                        broker_epoch,
                        states,
                        live_leaders,
                        false,
                    )
                        .into_pyobject(py)?
                        .into_any()
                }
                Sent::UpdateMetadata { brokers, entries } => {
                    let states = PartitionStates::new(&self.ctx, Entries::UpdateMetadata(entries));
                    // A fan-out: no broker of its own, its recipients in place of leaders.
                    ("UpdateMetadata", -1, -1, states, brokers, false)
                        .into_pyobject(py)?
                        .into_any()
                }
                Sent::StopReplica {
                    broker,
                    broker_epoch,
                    delete_partitions,
                    entries,
                } => {
                    let states = PartitionStates::new(&self.ctx, Entries::StopReplica(entries));
                    let no_leaders = Vec::<BrokerId>::new();
                    (
                        "StopReplica",
                        broker,
                        broker_epoch,
                        states,
                        no_leaders,
                        delete_partitions,
                    )
                        .into_pyobject(py)?
                        .into_any()
                }
            };
            out.append(item)?;
        }
        Ok(out)
    }
}

#[pymethods]
impl Engine {
    #[new]
    fn new() -> Self {
        Self {
            ctx: Context::new(),
            batches: Vec::new(),
        }
    }

    // --- Handles -------------------------------------------------------------------------------

    /// The `(topic, partition)` pairs of a handle (materialised on demand by `kctl.native`).
    fn parts_list(&self, parts: &Parts) -> Vec<Tp> {
        parts.parts.iter().map(|p| self.tp(*p)).collect()
    }

    fn replicas_list(&self, replicas: &Replicas) -> Vec<ReplicaTuple> {
        replicas
            .items
            .iter()
            .map(|(p, b)| {
                (
                    self.ctx.topic_name(self.ctx.partition_topic(*p)).to_owned(),
                    self.ctx.partition_id(*p),
                    *b,
                )
            })
            .collect()
    }

    /// `((topic, partition, broker), value)` for each result: a LeaderAndIsr, a replica-state id or
    /// the exception (partition results carry broker -1).
    fn outcomes_items<'py>(
        &self,
        py: Python<'py>,
        outcomes: &Outcomes,
    ) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for ((p, b), outcome) in &outcomes.items {
            let (topic, partition) = self.tp(*p);
            let value = match outcome {
                Outcome::Elected(lai) => leader_and_isr_to_py(py, lai)?,
                Outcome::State(state) => state.into_pyobject(py)?.into_any(),
                Outcome::Failed(e) => failure_to_py(py, e)?,
            };
            out.append(((topic, partition, *b), value))?;
        }
        Ok(out)
    }

    // --- Epoch, metrics, reset -----------------------------------------------------------------

    #[getter]
    fn epoch(&self) -> i32 {
        self.ctx.epoch
    }

    #[setter]
    fn set_epoch(&mut self, value: i32) {
        self.ctx.epoch = value;
    }

    #[getter]
    fn epoch_zk_version(&self) -> i32 {
        self.ctx.epoch_zk_version
    }

    #[setter]
    fn set_epoch_zk_version(&mut self, value: i32) {
        self.ctx.epoch_zk_version = value;
    }

    fn reset(&mut self) {
        self.ctx.reset();
    }

    fn offline_partition_count(&self) -> i64 {
        self.ctx.offline_partition_count()
    }

    fn preferred_replica_imbalance_count(&self) -> i64 {
        self.ctx.preferred_replica_imbalance_count()
    }

    fn unclean_leader_elections(&self) -> i64 {
        self.ctx.unclean_leader_elections()
    }

    fn record_unclean_leader_election(&mut self) {
        self.ctx.record_unclean_leader_election();
    }

    fn heap_bytes(&self) -> usize {
        self.ctx.heap_bytes()
    }

    // --- Brokers -------------------------------------------------------------------------------

    fn set_live_brokers(&mut self, epochs: Vec<(BrokerId, i64)>) {
        self.ctx.set_live_brokers(&epochs);
    }

    fn add_live_brokers(&mut self, epochs: Vec<(BrokerId, i64)>) {
        self.ctx.add_live_brokers(&epochs);
    }

    fn remove_live_brokers(&mut self, brokers: Vec<BrokerId>) {
        self.ctx.remove_live_brokers(&brokers);
    }

    fn live_broker_ids(&self) -> Vec<BrokerId> {
        self.ctx.live_broker_ids()
    }

    fn live_or_shutting_down_broker_ids(&self) -> Vec<BrokerId> {
        self.ctx.live_or_shutting_down_broker_ids()
    }

    fn shutting_down_broker_ids(&self) -> Vec<BrokerId> {
        self.ctx.shutting_down_broker_ids()
    }

    fn add_shutting_down_broker(&mut self, broker: BrokerId) {
        self.ctx.add_shutting_down_broker(broker);
    }

    fn remove_shutting_down_brokers(&mut self, brokers: Vec<BrokerId>) {
        self.ctx.remove_shutting_down_brokers(&brokers);
    }

    fn live_broker_epoch(&self, broker: BrokerId) -> Option<i64> {
        self.ctx.live_broker_epoch(broker)
    }

    fn live_broker_epochs(&self) -> Vec<(BrokerId, i64)> {
        self.ctx.live_broker_epochs()
    }

    fn is_replica_online(
        &self,
        broker: BrokerId,
        topic: &str,
        partition: i32,
        include_shutting_down: bool,
    ) -> bool {
        match self.existing(topic, partition) {
            Some(p) => self.ctx.is_replica_online(broker, p, include_shutting_down),
            None => {
                self.ctx.is_registered(broker)
                    && (include_shutting_down || !self.ctx.is_shutting_down(broker))
            }
        }
    }

    fn add_replicas_on_offline_dirs(
        &mut self,
        broker: BrokerId,
        parts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let parts = self.resolve_parts(parts)?;
        self.ctx.add_replicas_on_offline_dirs(broker, &parts);
        Ok(())
    }

    fn remove_replicas_on_offline_dirs(
        &mut self,
        broker: BrokerId,
        parts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let parts = self.resolve_parts(parts)?;
        self.ctx.remove_replicas_on_offline_dirs(broker, &parts);
        Ok(())
    }

    fn clear_replicas_on_offline_dirs(&mut self, brokers: Vec<BrokerId>) {
        self.ctx.clear_replicas_on_offline_dirs(&brokers);
    }

    fn replicas_on_offline_dirs(&self, broker: BrokerId) -> Parts {
        self.handle(self.ctx.replicas_on_offline_dirs(broker))
    }

    // --- Topics and assignments ----------------------------------------------------------------

    fn all_topics(&self) -> Vec<String> {
        self.ctx
            .all_topics()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn add_topic(&mut self, topic: &str, topic_id: Option<String>) {
        self.ctx.add_topic(topic, topic_id);
    }

    fn remove_topic(&mut self, topic: &str) {
        self.ctx.remove_topic(topic);
    }

    fn topic_ids(&self) -> Vec<(String, String)> {
        self.ctx
            .topic_ids()
            .into_iter()
            .map(|(t, id)| (t.to_owned(), id.to_owned()))
            .collect()
    }

    fn update_assignment(&mut self, topic: &str, partition: i32, assignment: AssignmentTuple) {
        let p = self.ctx.intern_part(topic, partition);
        self.ctx
            .update_assignment(p, &assignment_from_tuple(assignment));
    }

    fn put_assignments(&mut self, items: Vec<(String, i32, AssignmentTuple)>) {
        for (topic, partition, assignment) in items {
            let p = self.ctx.intern_part(&topic, partition);
            self.ctx
                .update_assignment(p, &assignment_from_tuple(assignment));
        }
    }

    /// Room for `count` more partitions in the context's columns (see `Context::reserve_partitions`).
    fn reserve_partitions(&mut self, count: usize) {
        self.ctx.reserve_partitions(count);
    }

    /// Load a topic's stored assignment (a mapping of partition id → `ReplicaAssignment`, read in
    /// place), in partition order; partitions with adding or removing replicas are marked as being
    /// reassigned. Returns the topic's loaded partitions.
    fn put_topic_assignment(
        &mut self,
        topic: &str,
        partitions: &Bound<'_, PyAny>,
    ) -> PyResult<Parts> {
        let py = partitions.py();
        let mut items: Vec<(i32, ReplicaAssignment)> = Vec::new();
        // A store may share one `ReplicaAssignment` among the partitions with the same replicas
        // (the memory store does: a cluster has a few thousand distinct ones), so each object is
        // read once. Held here, an object keeps its address for the whole call.
        let mut read: HashMap<usize, (Py<PyAny>, ReplicaAssignment)> = HashMap::default();
        let mut add = |partition: &Bound<'_, PyAny>, assignment: &Bound<'_, PyAny>| {
            let key = assignment.as_ptr() as usize;
            let assignment = match read.get(&key) {
                Some((_, known)) => known.clone(),
                None => {
                    let fresh = ReplicaAssignment {
                        replicas: brokers_of(&assignment.getattr(pyo3::intern!(py, "replicas"))?)?,
                        adding: brokers_of(
                            &assignment.getattr(pyo3::intern!(py, "adding_replicas"))?,
                        )?,
                        removing: brokers_of(
                            &assignment.getattr(pyo3::intern!(py, "removing_replicas"))?,
                        )?,
                    };
                    read.insert(key, (assignment.clone().unbind(), fresh.clone()));
                    fresh
                }
            };
            items.push((partition.extract()?, assignment));
            PyResult::Ok(())
        };
        if let Ok(dict) = partitions.cast::<PyDict>() {
            for (partition, assignment) in dict.iter() {
                add(&partition, &assignment)?;
            }
        } else {
            for item in partitions
                .call_method0(pyo3::intern!(py, "items"))?
                .try_iter()?
            {
                let (partition, assignment): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                    item?.extract()?;
                add(&partition, &assignment)?;
            }
        }
        items.sort_unstable_by_key(|(partition, _)| *partition);
        let mut loaded = Vec::with_capacity(items.len());
        for (partition, assignment) in items {
            let p = self.ctx.intern_part(topic, partition);
            let moving = !assignment.adding.is_empty() || !assignment.removing.is_empty();
            self.ctx.update_assignment(p, &assignment);
            if moving {
                self.ctx.add_partition_being_reassigned(p);
            }
            loaded.push(p);
        }
        Ok(self.handle(loaded))
    }

    fn assignment(&self, topic: &str, partition: i32) -> AssignmentTuple {
        let a = self
            .existing(topic, partition)
            .map(|p| self.ctx.assignment(p))
            .unwrap_or_default();
        (a.replicas, a.adding, a.removing)
    }

    /// `(topic, partition, assignment now)` for each assignment change since the previous call,
    /// or None when they are not known (see `Context::take_assignment_changes`).
    fn take_assignment_changes(&mut self) -> Option<Vec<(String, i32, AssignmentTuple)>> {
        let changes = self.ctx.take_assignment_changes()?;
        Some(
            changes
                .into_iter()
                .map(|p| {
                    let a = self.ctx.assignment(p);
                    (
                        self.ctx.topic_name(self.ctx.partition_topic(p)).to_owned(),
                        self.ctx.partition_id(p),
                        (a.replicas, a.adding, a.removing),
                    )
                })
                .collect(),
        )
    }

    fn assignments_for_topic(&self, topic: &str) -> Vec<(i32, AssignmentTuple)> {
        self.ctx
            .partitions_for_topic(topic)
            .into_iter()
            .map(|p| {
                let a = self.ctx.assignment(p);
                (self.ctx.partition_id(p), (a.replicas, a.adding, a.removing))
            })
            .collect()
    }

    fn partitions_for_topic(&self, topic: &str) -> Parts {
        self.handle(self.ctx.partitions_for_topic(topic))
    }

    fn all_partitions(&self, py: Python<'_>) -> Parts {
        self.parts_detached(py, |ctx| ctx.all_partitions())
    }

    fn partition_count(&self) -> usize {
        self.ctx.partition_count()
    }

    fn partitions_on_broker(&self, py: Python<'_>, broker: BrokerId) -> Parts {
        self.parts_detached(py, |ctx| ctx.partitions_on_broker(broker))
    }

    fn replicas_on_brokers(&self, py: Python<'_>, brokers: Vec<BrokerId>) -> Replicas {
        let ctx = &self.ctx;
        self.replica_handle(py.detach(|| ctx.replicas_on_brokers(&brokers)))
    }

    fn replicas_for_topic(&self, topic: &str) -> Replicas {
        self.replica_handle(self.ctx.replicas_for_topic(topic))
    }

    fn replicas_for_partitions(&mut self, parts: &Bound<'_, PyAny>) -> PyResult<Replicas> {
        let parts = self.resolve_parts(parts)?;
        let parts: Vec<Part> = parts
            .iter()
            .copied()
            .filter(|p| self.ctx.has_assignment(*p))
            .collect();
        Ok(self.replica_handle(self.ctx.replicas_for_partitions(&parts)))
    }

    fn online_and_offline_replicas(&self, py: Python<'_>) -> (Replicas, Replicas) {
        let ctx = &self.ctx;
        let (online, offline) = py.detach(|| ctx.online_and_offline_replicas());
        (self.replica_handle(online), self.replica_handle(offline))
    }

    /// `online_and_offline_replicas` grouped by broker, for the replica state machine's startup
    /// (see `Context::online_and_offline_replicas_by_broker`).
    fn online_and_offline_replicas_by_broker(&self, py: Python<'_>) -> (Replicas, Replicas) {
        let ctx = &self.ctx;
        let (online, offline) = py.detach(|| ctx.online_and_offline_replicas_by_broker());
        (self.replica_handle(online), self.replica_handle(offline))
    }

    fn partitions_being_reassigned(&self) -> Parts {
        self.handle(self.ctx.partitions_being_reassigned())
    }

    fn is_partition_being_reassigned(&self, topic: &str, partition: i32) -> bool {
        self.existing(topic, partition)
            .is_some_and(|p| self.ctx.is_partition_being_reassigned(p))
    }

    fn add_partition_being_reassigned(&mut self, topic: &str, partition: i32) {
        let p = self.ctx.intern_part(topic, partition);
        self.ctx.add_partition_being_reassigned(p);
    }

    fn remove_partition_being_reassigned(&mut self, topic: &str, partition: i32) {
        if let Some(p) = self.existing(topic, partition) {
            self.ctx.remove_partition_being_reassigned(p);
        }
    }

    // --- Leadership ----------------------------------------------------------------------------

    fn put_leadership(&mut self, topic: &str, partition: i32, lice: StateTuple) {
        let p = self.ctx.intern_part(topic, partition);
        self.ctx.put_leadership(p, &state_from_tuple(lice));
    }

    fn put_leaderships(&mut self, items: Vec<(String, i32, StateTuple)>) {
        for (topic, partition, lice) in items {
            let p = self.ctx.intern_part(&topic, partition);
            self.ctx.put_leadership(p, &state_from_tuple(lice));
        }
    }

    /// Cache the stored states of `parts` as they are, in one bulk read (failover, new
    /// partitions); returns `(topic, partition, error)` for each state that could not be read
    /// (a missing state is not an error).
    fn load_leaderships<'py>(
        &mut self,
        py: Python<'py>,
        parts: &Bound<'py, PyAny>,
        store: Bound<'py, PyAny>,
    ) -> PyResult<Vec<(String, i32, PyErr)>> {
        let parts = self.resolve_parts(parts)?;
        let store = StoreRef::of(&store);
        let ctx = &self.ctx;
        let reads = detached(py, || store.with(|s| s.read_states(ctx, &parts)))?;
        let mut failed = Vec::new();
        for (&p, read) in parts.iter().zip(reads) {
            match read {
                Read::Found(lice) => self.ctx.put_leadership(p, &lice),
                Read::Missing => {}
                Read::Failed(e) => failed.push((
                    self.ctx.topic_name(self.ctx.partition_topic(p)).to_owned(),
                    self.ctx.partition_id(p),
                    failure_to_err(py, &e),
                )),
            }
        }
        Ok(failed)
    }

    fn leadership(&self, topic: &str, partition: i32) -> Option<StateTuple> {
        self.existing(topic, partition)
            .and_then(|p| self.ctx.leadership(p))
            .map(|l| state_to_tuple(&l))
    }

    /// Of an AlterPartition's proposals (`{tp: LeaderAndIsr}`), the keys Kafka's full checks must
    /// judge (in order): the others are written as proposed ([`Context::isr_change_writable`]).
    /// Anything not read plainly (another type, a list for the ISR) is left to the full checks,
    /// which refuse it by name.
    fn isr_changes_to_check<'py>(
        &self,
        py: Python<'py>,
        changes: &Bound<'py, PyDict>,
        eligible: Option<HashSet<BrokerId>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let recovered = classes(py)?.recovery_state(py, LeaderRecoveryState::Recovered);
        let mut to_check = Vec::new();
        for (tp, proposed) in changes.iter() {
            let writable = match (tp.extract::<Tp>(), plain_proposal(&proposed, recovered)) {
                (Ok((topic, partition)), Some(proposed)) => (self.existing(&topic, partition))
                    .is_some_and(|p| {
                        self.ctx
                            .isr_change_writable(p, &proposed, eligible.as_ref())
                    }),
                _ => false,
            };
            if !writable {
                to_check.push(tp);
            }
        }
        Ok(to_check)
    }

    fn clear_leadership(&mut self) {
        self.ctx.clear_leadership();
    }

    fn partitions_with_leaders(&self, py: Python<'_>) -> Parts {
        self.parts_detached(py, |ctx| ctx.partitions_with_leaders())
    }

    fn unconverged_partitions(&self, py: Python<'_>, limit: usize) -> Parts {
        self.parts_detached(py, |ctx| ctx.unconverged_partitions(limit))
    }

    fn partitions_with_offline_leader(&self, py: Python<'_>) -> Parts {
        self.parts_detached(py, |ctx| ctx.partitions_with_offline_leader())
    }

    fn partition_leaders_on_broker(&self, py: Python<'_>, broker: BrokerId) -> Parts {
        self.parts_detached(py, |ctx| ctx.partition_leaders_on_broker(broker))
    }

    fn leader_counts(&self) -> Vec<(BrokerId, i64)> {
        self.ctx.leader_counts()
    }

    fn replica_counts(&self) -> Vec<(BrokerId, i64)> {
        self.ctx.replica_counts()
    }

    // --- Bulk views for the controller's hot paths ---------------------------------------------

    fn split_replicas_by_topic_deletion(
        &mut self,
        replicas: &Bound<'_, PyAny>,
    ) -> PyResult<(Replicas, Replicas)> {
        let replicas = self.resolve_replicas(replicas)?;
        let (deleting, others) = self.ctx.split_replicas_by_topic_deletion(&replicas);
        Ok((self.replica_handle(deleting), self.replica_handle(others)))
    }

    fn controlled_shutdown_partitions(&self, broker: BrokerId) -> (Parts, Parts) {
        let (led, followed) = self.ctx.controlled_shutdown_partitions(broker);
        (self.handle(led), self.handle(followed))
    }

    fn replicas_of(&mut self, parts: &Bound<'_, PyAny>, broker: BrokerId) -> PyResult<Replicas> {
        let parts = self.resolve_parts(parts)?;
        Ok(self.replica_handle(parts.iter().map(|&p| (p, broker)).collect()))
    }

    fn partitions_not_led_by_preferred(&mut self, parts: &Bound<'_, PyAny>) -> PyResult<Parts> {
        let parts = self.resolve_parts(parts)?;
        Ok(self.handle(self.ctx.partitions_not_led_by_preferred(&parts)))
    }

    fn auto_rebalance_candidates(
        &self,
        ratio: f64,
        reassignments_block: bool,
    ) -> Vec<(BrokerId, Parts)> {
        self.ctx
            .auto_rebalance_candidates(ratio, reassignments_block)
            .into_iter()
            .map(|(broker, parts)| (broker, self.handle(parts)))
            .collect()
    }

    // --- States --------------------------------------------------------------------------------

    fn partition_state(&self, topic: &str, partition: i32) -> u8 {
        self.existing(topic, partition)
            .map_or(PartitionState::NonExistent, |p| self.ctx.partition_state(p)) as u8
    }

    fn has_partition_state(&self, topic: &str, partition: i32) -> bool {
        self.existing(topic, partition)
            .is_some_and(|p| self.ctx.has_partition_state(p))
    }

    fn put_partition_state(&mut self, topic: &str, partition: i32, state: u8) -> PyResult<()> {
        let p = self.ctx.intern_part(topic, partition);
        self.ctx.put_partition_state(p, partition_state(state)?);
        Ok(())
    }

    #[pyo3(signature = (states, topic=None))]
    fn partitions_in_states(&self, states: Vec<u8>, topic: Option<&str>) -> PyResult<Parts> {
        let states = states
            .into_iter()
            .map(partition_state)
            .collect::<PyResult<Vec<_>>>()?;
        Ok(self.handle(self.ctx.partitions_in_states(&states, topic)))
    }

    fn replica_state(&self, topic: &str, partition: i32, broker: BrokerId) -> Option<u8> {
        self.existing(topic, partition)
            .and_then(|p| self.ctx.replica_state(p, broker))
            .map(|s| s as u8)
    }

    fn put_replica_state(
        &mut self,
        topic: &str,
        partition: i32,
        broker: BrokerId,
        state: u8,
    ) -> PyResult<()> {
        let p = self.ctx.intern_part(topic, partition);
        self.ctx.put_replica_state(p, broker, replica_state(state)?);
        Ok(())
    }

    fn remove_replica_state(&mut self, topic: &str, partition: i32, broker: BrokerId) {
        if let Some(p) = self.existing(topic, partition) {
            self.ctx.remove_replica_state(p, broker);
        }
    }

    fn replicas_in_state(&self, topic: &str, state: u8) -> PyResult<Replicas> {
        Ok(self.replica_handle(self.ctx.replicas_in_state(topic, replica_state(state)?)))
    }

    fn are_all_replicas_in_state(&self, topic: &str, state: u8) -> PyResult<bool> {
        Ok(self
            .ctx
            .are_all_replicas_in_state(topic, replica_state(state)?))
    }

    fn is_any_replica_in_state(&self, topic: &str, state: u8) -> PyResult<bool> {
        Ok(self
            .ctx
            .is_any_replica_in_state(topic, replica_state(state)?))
    }

    // --- Topic deletion ------------------------------------------------------------------------

    fn topics_to_be_deleted(&self) -> Vec<String> {
        self.ctx
            .topics_to_be_deleted()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn topics_with_deletion_started(&self) -> Vec<String> {
        self.ctx
            .topics_with_deletion_started()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn topics_ineligible_for_deletion(&self) -> Vec<String> {
        self.ctx
            .topics_ineligible_for_deletion()
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn queue_topic_deletion(&mut self, topics: Vec<String>) {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        self.ctx.queue_topic_deletion(&names);
    }

    fn begin_topic_deletion(&mut self, topics: Vec<String>) {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        self.ctx.begin_topic_deletion(&names);
    }

    fn mark_topics_ineligible_for_deletion(&mut self, topics: Vec<String>) {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        self.ctx.mark_topics_ineligible_for_deletion(&names);
    }

    fn clear_topics_ineligible_for_deletion(&mut self, topics: Vec<String>) {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        self.ctx.clear_topics_ineligible_for_deletion(&names);
    }

    // --- Request batches -----------------------------------------------------------------------

    fn new_batch_slot(&mut self) -> usize {
        self.batches.push(RequestBatch::default());
        self.batches.len() - 1
    }

    fn batch_check_empty(&mut self, slot: usize) -> PyResult<Option<String>> {
        Ok(self.batch(slot)?.check_empty().err())
    }

    fn batch_clear(&mut self, slot: usize) -> PyResult<()> {
        self.batch(slot)?.clear();
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn batch_add_leader_and_isr(
        &mut self,
        slot: usize,
        brokers: Vec<BrokerId>,
        topic: &str,
        partition: i32,
        lice: StateTuple,
        assignment: AssignmentTuple,
        is_new: bool,
    ) -> PyResult<()> {
        let p = self.ctx.intern_part(topic, partition);
        self.batch(slot)?;
        self.batches[slot].add_leader_and_isr(
            &self.ctx,
            &brokers,
            p,
            &state_from_tuple(lice),
            &assignment_from_tuple(assignment),
            is_new,
        );
        Ok(())
    }

    fn batch_add_update_metadata(
        &mut self,
        slot: usize,
        brokers: Vec<BrokerId>,
        parts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let parts = self.resolve_parts(parts)?;
        self.batch(slot)?;
        self.batches[slot].add_update_metadata(&self.ctx, &brokers, &parts);
        Ok(())
    }

    /// StopReplica for each partition (to the same brokers), in order.
    fn batch_add_stop_replicas(
        &mut self,
        slot: usize,
        brokers: Vec<BrokerId>,
        parts: &Bound<'_, PyAny>,
        delete: bool,
    ) -> PyResult<()> {
        let parts = self.resolve_parts(parts)?;
        self.batch(slot)?;
        if let [broker] = brokers[..] {
            // A controlled shutdown stops every partition the broker follows: one run.
            self.batches[slot].add_stop_replicas(&self.ctx, broker, &parts, delete);
            return Ok(());
        }
        for &p in parts.iter() {
            self.batches[slot].add_stop_replica(&self.ctx, &brokers, p, delete);
        }
        Ok(())
    }

    /// `(per-broker requests, UpdateMetadata brokers, the UpdateMetadata payload)`, raw.
    fn batch_pending<'py>(
        &mut self,
        py: Python<'py>,
        slot: usize,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.batch(slot)?;
        let batch = &self.batches[slot];
        let mut sent = Vec::new();
        for (broker, states) in batch.pending_leader_and_isr() {
            sent.push(Sent::LeaderAndIsr {
                broker: *broker,
                broker_epoch: -1,
                entries: states.values().cloned().collect(),
                live_leaders: Vec::new(),
            });
        }
        for (broker, states) in batch.pending_stop_replica() {
            sent.push(Sent::StopReplica {
                broker: *broker,
                broker_epoch: -1,
                delete_partitions: false,
                entries: states.values().copied().collect(),
            });
        }
        let (brokers, states) = batch.pending_update_metadata();
        let um = Sent::UpdateMetadata {
            brokers: Vec::new(),
            entries: Arc::new(UpdateMetadataEntries::new(
                states.into_iter().cloned().collect(),
            )),
        };
        let per_broker = self.sent_to_py(py, sent)?;
        let shared = self.sent_to_py(py, vec![um])?;
        PyTuple::new(
            py,
            [
                per_broker.into_any(),
                brokers.into_pyobject(py)?.into_any(),
                shared.get_item(0)?,
            ],
        )
    }

    /// Flush a batch: `(log lines, sent requests as tuples)`.
    fn batch_send<'py>(
        &mut self,
        py: Python<'py>,
        slot: usize,
        stop_replica_version: i32,
        info: bool,
    ) -> PyResult<(StateChangeLines, Bound<'py, PyList>)> {
        self.batch(slot)?;
        let mut lines = Vec::new();
        let sent = self.batches[slot].send(&self.ctx, stop_replica_version, &mut |text| {
            if info {
                lines.push(Line {
                    level: Level::Info,
                    from_batch: true,
                    text: Text::Made(text),
                });
            }
        });
        Ok((StateChangeLines { lines }, self.sent_to_py(py, sent)?))
    }

    // --- State machines ------------------------------------------------------------------------

    fn initialize_partition_states(&mut self) {
        self.ctx.initialize_partition_states();
    }

    #[pyo3(signature = (topic=None))]
    fn partitions_to_trigger_online(&self, py: Python<'_>, topic: Option<&str>) -> Parts {
        self.parts_detached(py, |ctx| ctx.partitions_to_trigger_online(topic))
    }

    /// The partition state machine's `handle_state_changes`: `(results, log lines, sent)`; a moved
    /// controller raises.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (slot, parts, target, election, selector, store, options))]
    fn partition_state_changes<'py>(
        &mut self,
        py: Python<'py>,
        slot: usize,
        parts: &Bound<'py, PyAny>,
        target: u8,
        election: Option<(String, bool)>,
        selector: Option<Py<PyAny>>,
        store: Bound<'py, PyAny>,
        options: CallOptions,
    ) -> PyResult<CallResult<'py>> {
        let target = partition_state(target)?;
        let strategy = strategy(election)?;
        let parts = self.resolve_parts(parts)?;
        self.run(
            py,
            slot,
            &store,
            &options,
            |m| {
                let mut kafka = KafkaSelector;
                let mut plugin = selector.map(|selection| PySelector { selection });
                let chosen: &mut dyn Selector = match plugin.as_mut() {
                    Some(p) => p,
                    None => &mut kafka,
                };
                m.handle_partition_state_changes(&parts, target, strategy, chosen)
            },
            |p| (p, -1),
            Outcome::Elected,
        )
    }

    fn initialize_replica_states(&mut self) {
        self.ctx.initialize_replica_states();
    }

    /// The replica state machine's `handle_state_changes`: `(results, log lines, sent)`; a moved
    /// controller raises. `results=False`: the caller reads none, so none are kept (empty).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (slot, replicas, target, store, options, results=true))]
    fn replica_state_changes<'py>(
        &mut self,
        py: Python<'py>,
        slot: usize,
        replicas: &Bound<'py, PyAny>,
        target: u8,
        store: Bound<'py, PyAny>,
        options: CallOptions,
        results: bool,
    ) -> PyResult<CallResult<'py>> {
        let target = replica_state(target)?;
        let replicas = self.resolve_replicas(replicas)?;
        self.run(
            py,
            slot,
            &store,
            &options,
            |m| {
                if results {
                    m.handle_replica_state_changes(&replicas, target)
                } else {
                    m.handle_replica_state_changes_unread(&replicas, target)
                        .map(|()| Vec::new())
                }
            },
            |r| r,
            |s| Outcome::State(s as u8),
        )
    }
}

/// A Python store as the engine uses it without the GIL: natively for a plain memory store, with
/// native request encoding for a plain ZooKeeper store, through Python otherwise.
struct StoreRef {
    store: Py<PyAny>,
    kind: StoreKind,
}

enum StoreKind {
    Memory,
    ZooKeeper(ZkParams),
    Python,
}

impl StoreRef {
    fn of(store: &Bound<'_, PyAny>) -> Self {
        let kind = if NativeMemory::supports(store) {
            StoreKind::Memory
        } else if let Some(params) = NativeZooKeeper::supports(store) {
            StoreKind::ZooKeeper(params)
        } else {
            StoreKind::Python
        };
        Self {
            store: store.clone().unbind(),
            kind,
        }
    }

    fn with<T>(self, call: impl FnOnce(&mut (dyn Store + Send)) -> T) -> T {
        let inner = PyStore { store: self.store };
        match self.kind {
            StoreKind::Memory => call(&mut NativeMemory { inner }),
            StoreKind::ZooKeeper(params) => call(&mut NativeZooKeeper { inner, params }),
            StoreKind::Python => call(&mut { inner }),
        }
    }
}

/// A proposed `LeaderAndIsr` read as Kafka's checks compare it (an ISR tuple of ints, the
/// RECOVERED member itself), or None for anything else.
fn plain_proposal(
    proposed: &Bound<'_, PyAny>,
    recovered: &Bound<'_, PyAny>,
) -> Option<LeaderAndIsr> {
    let py = proposed.py();
    if !proposed
        .getattr(intern!(py, "leader_recovery_state"))
        .ok()?
        .is(recovered)
    {
        return None;
    }
    let isr = proposed.getattr(intern!(py, "isr")).ok()?;
    let isr = isr.cast_exact::<PyTuple>().ok()?;
    Some(LeaderAndIsr {
        leader: proposed
            .getattr(intern!(py, "leader"))
            .ok()?
            .extract()
            .ok()?,
        isr: isr
            .iter()
            .map(|b| b.extract().ok())
            .collect::<Option<Brokers>>()?,
        leader_epoch: proposed
            .getattr(intern!(py, "leader_epoch"))
            .ok()?
            .extract()
            .ok()?,
        partition_epoch: proposed
            .getattr(intern!(py, "partition_epoch"))
            .ok()?
            .extract()
            .ok()?,
        recovery: LeaderRecoveryState::Recovered,
    })
}
