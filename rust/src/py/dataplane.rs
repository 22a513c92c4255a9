//! `DataPlane`: the simulated data plane of a cluster (`crate::dataplane`) for
//! `kctl.broker.native_data_plane`. Partitions cross as `TopicPartition` objects, numbered here
//! on first sight; each call returns the timers it armed, as `(kind, broker)` pairs (0: the
//! fetcher, 1: the ISR-expiration task, 2: the AlterPartition flush).

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFrozenSet, PyList, PyString, PyTuple};

use crate::dataplane::{self, Answer, Effect, LeaderAndIsrRow, Pid, ProduceError, Role};
use crate::hash::{HashMap, NameMap};
use crate::model::{BrokerId, Brokers, LeaderAndIsr, LeaderRecoveryState, EPOCH_DURING_DELETE};
use crate::py::classes::classes;
use crate::py::convert::leader_and_isr_to_py;
use crate::py::payload::{keys, leader_and_isr_entries, stop_replica_entries, PartitionStates};
use crate::requests::HasHead;

type Effects = Vec<(u8, BrokerId)>;

/// An ISR write's outcome: the ISR and partition epoch written.
type Written = (Brokers, i32);

/// Every simulated broker's replica table and the ledger of one cluster.
#[pyclass(module = "kctl._engine")]
pub struct DataPlane {
    core: dataplane::DataPlane,
    /// The `TopicPartition` of each partition number.
    keys: Vec<Py<PyAny>>,
    /// Partition numbers by the address of their key in `keys` (which holds it alive).
    by_address: HashMap<usize, Pid>,
    /// Partition numbers by topic and partition id.
    by_name: NameMap<Arc<str>, TopicPids>,
}

/// The numbers of one topic's partitions, by partition id.
type TopicPids = HashMap<i32, Pid>;

impl DataPlane {
    /// The number of partition `tp` (a `(topic, partition)` tuple), given one on first sight.
    fn pid(&mut self, tp: &Bound<'_, PyAny>) -> PyResult<Pid> {
        let address = tp.as_ptr() as usize;
        if let Some(&pid) = self.by_address.get(&address) {
            return Ok(pid);
        }
        let pid = self.known(tp)?;
        match pid {
            Some(pid) => Ok(pid),
            None => {
                let (topic, partition) = name(tp)?;
                let pid = Pid::try_from(self.keys.len())
                    .map_err(|_| PyValueError::new_err("too many partitions for one data plane"))?;
                self.keys.push(tp.clone().unbind());
                self.by_address.insert(address, pid);
                (self.by_name.entry(Arc::from(topic)).or_default()).insert(partition, pid);
                Ok(pid)
            }
        }
    }

    /// The number of a partition seen before.
    fn known(&self, tp: &Bound<'_, PyAny>) -> PyResult<Option<Pid>> {
        if let Some(&pid) = self.by_address.get(&(tp.as_ptr() as usize)) {
            return Ok(Some(pid));
        }
        let (topic, partition) = name(tp)?;
        Ok(self
            .by_name
            .get(topic.as_str())
            .and_then(|of_topic| of_topic.get(&partition))
            .copied())
    }

    /// The numbers of a payload's partitions `(topic, partition id, entry index)`, given (with
    /// the key objects payload rows share, see `payload::keys`) to those seen first.
    fn payload_pids(
        &mut self,
        py: Python<'_>,
        named: &[(&Arc<str>, i32, usize)],
    ) -> PyResult<Vec<Pid>> {
        let mut found: Vec<Option<Pid>> = Vec::with_capacity(named.len());
        let mut last: Option<(&Arc<str>, Option<&TopicPids>)> = None;
        for &(topic, id, _) in named {
            let of_topic = match last {
                Some((t, of_topic)) if Arc::ptr_eq(t, topic) => of_topic,
                _ => self.by_name.get(&**topic),
            };
            last = Some((topic, of_topic));
            found.push(of_topic.and_then(|of_topic| of_topic.get(&id)).copied());
        }
        let unknown: Vec<(&Arc<str>, i32, usize)> = (named.iter().zip(&found))
            .filter(|(_, pid)| pid.is_none())
            .map(|(n, _)| *n)
            .collect();
        if unknown.is_empty() {
            return Ok(found.into_iter().flatten().collect());
        }
        let mut made = keys(&unknown, py)?.into_iter();
        let mut pids = Vec::with_capacity(named.len());
        for (&(topic, id, _), pid) in named.iter().zip(found) {
            let pid = match pid {
                Some(pid) => pid,
                None => {
                    let key = made.next().expect("a key per unknown partition");
                    let pid = Pid::try_from(self.keys.len()).map_err(|_| {
                        PyValueError::new_err("too many partitions for one data plane")
                    })?;
                    self.by_address.insert(key.as_ptr() as usize, pid);
                    self.keys.push(key.unbind());
                    (self.by_name.entry(topic.clone()).or_default()).insert(id, pid);
                    pid
                }
            };
            pids.push(pid);
        }
        Ok(pids)
    }

    fn key<'py>(&self, py: Python<'py>, pid: Pid) -> Bound<'py, PyAny> {
        self.keys[pid as usize].bind(py).clone()
    }

    fn effects(&mut self) -> Effects {
        let code = |effect: Effect| match effect {
            Effect::Fetch(b) => (0, b),
            Effect::WatchIsr(b) => (1, b),
            Effect::Flush(b) => (2, b),
        };
        self.core.take_effects().into_iter().map(code).collect()
    }
}

/// `(topic, partition)` of a `TopicPartition`.
fn name(tp: &Bound<'_, PyAny>) -> PyResult<(String, i32)> {
    let tuple = tp.cast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err(format!("a partition must be a TopicPartition, not {tp}"))
    })?;
    if tuple.len() != 2 {
        return Err(PyValueError::new_err(format!(
            "a TopicPartition has two fields, not {tp}"
        )));
    }
    let topic = tuple.get_item(0)?;
    let topic = topic
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("a partition's topic must be a str: {tp}")))?;
    Ok((topic.to_str()?.to_owned(), tuple.get_item(1)?.extract()?))
}

fn role_code(role: Role) -> Option<&'static str> {
    match role {
        Role::Unhosted => None,
        Role::Leader => Some("leader"),
        Role::Follower => Some("follower"),
        Role::Stopped => Some("stopped"),
        Role::Offline => Some("offline"),
    }
}

/// A row's field `k`, with the row's position in the error.
fn field<'py, T: FromPyObjectOwned<'py>>(row: &Bound<'py, PyTuple>, k: usize) -> PyResult<T> {
    let item = row.get_item(k)?;
    item.extract::<T>().map_err(|e| {
        let e: PyErr = e.into();
        PyTypeError::new_err(format!("field {k} of partition state {row}: {e}"))
    })
}

#[pymethods]
impl DataPlane {
    #[new]
    fn new() -> Self {
        DataPlane {
            core: dataplane::DataPlane::new(),
            keys: Vec::new(),
            by_address: HashMap::default(),
            by_name: NameMap::default(),
        }
    }

    /// `fresh`: the first start of a replica manager (no logs of an earlier one for this broker).
    fn startup(&mut self, broker: BrokerId, max_fetch_records: Option<i64>, fresh: bool) {
        self.core.startup(broker, max_fetch_records, fresh);
    }

    fn shutdown(&mut self, broker: BrokerId, now: f64) -> Effects {
        self.core.shutdown(broker, now);
        self.effects()
    }

    /// LeaderAndIsr rows `(tp, controller_epoch, leader, leader_epoch, isr, partition_epoch,
    /// replicas, adding_replicas, is_new)`; the timers armed and how many I8 violations it found.
    fn leader_and_isr(
        &mut self,
        broker: BrokerId,
        rows: &Bound<'_, PyList>,
        now: f64,
    ) -> PyResult<(Effects, usize)> {
        let mut parsed = Vec::with_capacity(rows.len());
        for row in rows.iter() {
            let row = row.cast_into::<PyTuple>().map_err(|e| {
                PyTypeError::new_err(format!("a LeaderAndIsr row must be a tuple: {e}"))
            })?;
            if row.len() != 9 {
                return Err(PyValueError::new_err(format!(
                    "a LeaderAndIsr row has 9 fields, not {row}"
                )));
            }
            parsed.push(LeaderAndIsrRow {
                pid: self.pid(&row.get_item(0)?)?,
                controller_epoch: field(&row, 1)?,
                leader: field(&row, 2)?,
                leader_epoch: field(&row, 3)?,
                isr: field(&row, 4)?,
                partition_epoch: field(&row, 5)?,
                replicas: field(&row, 6)?,
                adding: field(&row, 7)?,
            });
        }
        let before = self.core.violations().len();
        self.core.leader_and_isr(broker, parsed, now);
        Ok((self.effects(), self.core.violations().len() - before))
    }

    /// The entries of a native LeaderAndIsr payload at `indices` (as `leader_and_isr`, without
    /// rows).
    fn leader_and_isr_states(
        &mut self,
        py: Python<'_>,
        broker: BrokerId,
        states: &Bound<'_, PartitionStates>,
        indices: Vec<usize>,
        now: f64,
    ) -> PyResult<(Effects, usize)> {
        let Some(entries) = leader_and_isr_entries(states.get(), Some(&indices))? else {
            return Err(PyValueError::new_err("not a LeaderAndIsr payload"));
        };
        let named: Vec<_> = (entries.iter().zip(&indices))
            .map(|((t, id, _), i)| (*t, *id, *i))
            .collect();
        let pids = self.payload_pids(py, &named)?;
        let rows = (entries.iter().zip(pids))
            .map(|((_, _, e), pid)| {
                let (controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas) =
                    e.head();
                LeaderAndIsrRow {
                    pid,
                    controller_epoch,
                    leader,
                    leader_epoch,
                    isr: Brokers::from_slice(isr),
                    partition_epoch,
                    replicas: Brokers::from_slice(replicas),
                    adding: Brokers::from_slice(e.adding()),
                }
            })
            .collect();
        let before = self.core.violations().len();
        self.core.leader_and_isr(broker, rows, now);
        Ok((self.effects(), self.core.violations().len() - before))
    }

    /// The entries of a native StopReplica payload at `indices` (as `stop_replicas`, without rows).
    fn stop_replica_states(
        &mut self,
        py: Python<'_>,
        broker: BrokerId,
        states: &Bound<'_, PartitionStates>,
        indices: Vec<usize>,
        now: f64,
    ) -> PyResult<Effects> {
        let Some(entries) = stop_replica_entries(states.get(), Some(&indices))? else {
            return Err(PyValueError::new_err("not a StopReplica payload"));
        };
        let named: Vec<_> = (entries.iter().zip(&indices))
            .map(|((t, id, _), i)| (*t, *id, *i))
            .collect();
        let pids = self.payload_pids(py, &named)?;
        let rows: Vec<_> = (entries.iter().zip(pids))
            .map(|((_, _, e), pid)| (pid, e.delete, e.leader_epoch == EPOCH_DURING_DELETE))
            .collect();
        self.core.stop_replicas(broker, &rows, now);
        Ok(self.effects())
    }

    /// StopReplica rows `(tp, leader_epoch, delete_partition)`.
    fn stop_replicas(
        &mut self,
        broker: BrokerId,
        rows: &Bound<'_, PyList>,
        now: f64,
    ) -> PyResult<Effects> {
        let mut parsed = Vec::with_capacity(rows.len());
        for row in rows.iter() {
            let row = row.cast_into::<PyTuple>().map_err(|e| {
                PyTypeError::new_err(format!("a StopReplica row must be a tuple: {e}"))
            })?;
            if row.len() != 3 {
                return Err(PyValueError::new_err(format!(
                    "a StopReplica row has 3 fields, not {row}"
                )));
            }
            let leader_epoch: i32 = field(&row, 1)?;
            let delete: bool = field(&row, 2)?;
            parsed.push((
                self.pid(&row.get_item(0)?)?,
                delete,
                leader_epoch == EPOCH_DURING_DELETE,
            ));
        }
        self.core.stop_replicas(broker, &parsed, now);
        Ok(self.effects())
    }

    fn mark_offline(
        &mut self,
        broker: BrokerId,
        partitions: Vec<Bound<'_, PyAny>>,
        now: f64,
    ) -> PyResult<Effects> {
        let pids = partitions
            .iter()
            .map(|tp| self.pid(tp))
            .collect::<PyResult<Vec<_>>>()?;
        self.core.mark_offline(broker, &pids, now);
        Ok(self.effects())
    }

    /// Append records on the broker's leader replica: the error's name ("NONE" when appended).
    fn produce(
        &mut self,
        broker: BrokerId,
        tp: &Bound<'_, PyAny>,
        records: i64,
        now: f64,
    ) -> PyResult<(&'static str, Effects)> {
        let Some(pid) = self.known(tp)? else {
            return Ok(("UNKNOWN_TOPIC_OR_PARTITION", Vec::new()));
        };
        let error = match self.core.produce(broker, pid, records, now) {
            ProduceError::None => "NONE",
            ProduceError::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ProduceError::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            ProduceError::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ProduceError::OffsetOverflow => {
                return Err(PyValueError::new_err(format!(
                "cannot produce {records} records to {tp}: its log would pass the largest offset"
            )))
            }
        };
        Ok((error, self.effects()))
    }

    fn pause_fetching(&mut self, broker: BrokerId, now: f64) -> Effects {
        self.core.pause_fetching(broker, now);
        self.effects()
    }

    fn resume_fetching(&mut self, broker: BrokerId) -> Effects {
        self.core.resume_fetching(broker);
        self.effects()
    }

    fn fetch_round(&mut self, broker: BrokerId, now: f64) -> (bool, Effects) {
        let more = self.core.fetch_round(broker, now);
        (more, self.effects())
    }

    fn check_isr(&mut self, broker: BrokerId, now: f64, max_lag: f64) -> (bool, Effects) {
        let more = self.core.check_isr(broker, now, max_lag);
        (more, self.effects())
    }

    /// The queued proposals as `({tp: LeaderAndIsr}, [controller epoch of each])`; `await_answer`:
    /// an AlterPartition request whose answer `alter_partition_done` takes.
    fn flush<'py>(
        &mut self,
        py: Python<'py>,
        broker: BrokerId,
        await_answer: bool,
    ) -> PyResult<(Bound<'py, PyDict>, Vec<i32>)> {
        let batch = PyDict::new(py);
        let mut controller_epochs = Vec::new();
        for p in self.core.flush(broker, await_answer) {
            let state = LeaderAndIsr {
                leader: broker,
                isr: p.isr,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                recovery: LeaderRecoveryState::Recovered,
            };
            batch.set_item(self.key(py, p.pid), leader_and_isr_to_py(py, &state)?)?;
            controller_epochs.push(p.controller_epoch);
        }
        Ok((batch, controller_epochs))
    }

    /// The answer to the AlterPartition request in flight: its partition results (a mapping, None
    /// for a top-level error) and the errors after which a leader awaits LeaderAndIsr. The
    /// partitions whose proposal failed, whether proposals are queued, the timers armed.
    fn alter_partition_done<'py>(
        &mut self,
        py: Python<'py>,
        broker: BrokerId,
        results: Option<&Bound<'py, PyAny>>,
        await_errors: &Bound<'py, PyFrozenSet>,
    ) -> PyResult<(Vec<Bound<'py, PyAny>>, bool, Effects)> {
        let answers = match results {
            None => None,
            Some(results) => {
                let class = classes(py)?.leader_and_isr.bind(py);
                let mut answers = Vec::new();
                for pid in self.core.in_flight(broker) {
                    let result = results.call_method1(intern!(py, "get"), (self.key(py, pid),))?;
                    let answer = match (!result.is_none()).then_some(result) {
                        None => Answer::Failed,
                        Some(result) if result.is_instance(class)? => Answer::Committed(
                            result.getattr("isr")?.extract::<Brokers>()?,
                            result.getattr("leader_epoch")?.extract()?,
                            result.getattr("partition_epoch")?.extract()?,
                        ),
                        Some(result) if await_errors.contains(&result)? => {
                            Answer::AwaitLeaderAndIsr
                        }
                        Some(_) => Answer::Failed,
                    };
                    answers.push(answer);
                }
                Some(answers)
            }
        };
        let (failed, queued) = self.core.alter_partition_done(broker, answers);
        let failed = failed.into_iter().map(|pid| self.key(py, pid)).collect();
        Ok((failed, queued, self.effects()))
    }

    /// Before AlterPartition, the leader's own writes: `[(tp, (isr, partition_epoch) or None)]`
    /// (None: the write failed), in order.
    fn isr_written(
        &mut self,
        broker: BrokerId,
        outcomes: Vec<(Bound<'_, PyAny>, Option<Written>)>,
    ) -> PyResult<Effects> {
        let outcomes = (outcomes.iter())
            .map(|(tp, outcome)| Ok((self.pid(tp)?, outcome.clone())))
            .collect::<PyResult<Vec<_>>>()?;
        self.core.isr_written(broker, outcomes);
        Ok(self.effects())
    }

    /// `(role, leader, leader_epoch, partition_epoch, isr, pending_isr, log_end_offset,
    /// high_watermark)` of a broker's replica (role None: not hosted since start-up), or None.
    #[allow(clippy::type_complexity)]
    fn replica_state(
        &self,
        broker: BrokerId,
        tp: &Bound<'_, PyAny>,
    ) -> PyResult<
        Option<(
            Option<&'static str>,
            BrokerId,
            i32,
            i32,
            Vec<BrokerId>,
            Option<Vec<BrokerId>>,
            i64,
            i64,
        )>,
    > {
        let Some(pid) = self.known(tp)? else {
            return Ok(None);
        };
        Ok(self.core.replica_state(broker, pid).map(|r| {
            (
                role_code(r.role),
                r.leader,
                r.leader_epoch,
                r.partition_epoch,
                r.isr.to_vec(),
                r.pending.as_ref().map(|p| p.to_vec()),
                r.leo,
                r.hw,
            )
        }))
    }

    /// Fault injection: the broker's log of `tp` silently loses its records from `offset` on.
    fn lose_records(
        &mut self,
        broker: BrokerId,
        tp: &Bound<'_, PyAny>,
        offset: i64,
    ) -> PyResult<()> {
        if let Some(pid) = self.known(tp)? {
            self.core.lose_records(broker, pid, offset);
        }
        Ok(())
    }

    fn hosted_partitions<'py>(&self, py: Python<'py>, broker: BrokerId) -> Vec<Bound<'py, PyAny>> {
        self.core
            .hosted(broker)
            .into_iter()
            .map(|pid| self.key(py, pid))
            .collect()
    }

    /// `(LeaderCount, PartitionCount, UnderReplicatedPartitions, OfflineReplicaCount, IsrExpands,
    /// IsrShrinks)` of a broker.
    fn metrics(&self, broker: BrokerId) -> (usize, usize, usize, usize, u64, u64) {
        let m = self.core.metrics(broker);
        (
            m.leaders,
            m.partitions,
            m.under_replicated,
            m.offline,
            m.isr_expands,
            m.isr_shrinks,
        )
    }

    /// Whether ISR changes are queued or a follower still fetches from a live leader.
    fn busy(&self, broker: BrokerId) -> bool {
        self.core.busy(broker)
    }

    /// The I8 violations found, from the `start`th: `(tp, broker, leader_epoch, log_end_offset,
    /// committed_offset)`.
    fn violations<'py>(
        &self,
        py: Python<'py>,
        start: usize,
    ) -> Vec<(Bound<'py, PyAny>, BrokerId, i32, i64, i64)> {
        (self.core.violations().iter().skip(start))
            .map(|v| {
                (
                    self.key(py, v.pid),
                    v.broker,
                    v.leader_epoch,
                    v.log_end_offset,
                    v.committed,
                )
            })
            .collect()
    }

    #[getter]
    fn unclean_elections(&self) -> u64 {
        self.core.unclean_elections()
    }

    #[getter]
    fn truncated_records(&self) -> i64 {
        self.core.truncated_records()
    }

    fn committed_offset(&self, tp: &Bound<'_, PyAny>) -> PyResult<i64> {
        Ok(self
            .known(tp)?
            .map_or(0, |pid| self.core.committed_offset(pid)))
    }
}
