//! `kctl._engine.HostedPartitions` and `PartitionErrors`: a simulated broker's checks of the
//! LeaderAndIsr and StopReplica requests it receives (`crate::hosted`), run over a request's
//! partition states in one call, and their per-partition answers, kept as error codes until
//! something reads them as a mapping. A restart of one of 100 brokers sends it and its peers
//! thousands of states, and every broker keeps each of these answers in its record.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyIterator, PyList, PyString};
use smallvec::SmallVec;

use super::{interned, rows, Entries, PartitionStates};
use crate::hash::HashSet;
use crate::hosted::{self, PartitionError};
use crate::py::classes::classes;

/// A broker process's hosted partitions (`crate::hosted::HostedPartitions`), checked against
/// the requests it receives.
#[pyclass(module = "kctl._engine")]
#[derive(Default)]
pub struct HostedPartitions {
    hosted: hosted::HostedPartitions,
}

#[pymethods]
impl HostedPartitions {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// The leader epoch held for `tp` (None: not hosted, or offline).
    fn leader_epoch(&self, tp: (Bound<'_, PyString>, i32)) -> PyResult<Option<i32>> {
        Ok(match self.hosted.get(tp.0.to_str()?, tp.1) {
            Some(hosted::Hosted::Online(epoch)) => Some(epoch),
            _ => None,
        })
    }

    /// The log directory of `partitions` failed: those hosted go offline.
    fn mark_offline(&mut self, partitions: Vec<(Bound<'_, PyString>, i32)>) -> PyResult<()> {
        for (topic, partition) in &partitions {
            self.hosted.mark_offline(topic.to_str()?, *partition);
        }
        Ok(())
    }

    /// `ReplicaManager.becomeLeaderOrFollower`'s checks of each of `states` (a LeaderAndIsr
    /// request's: a native payload or `LeaderAndIsrPartitionState` objects), in order, for broker
    /// `broker_id`: the indices of the accepted states, now held at their leader epochs, and the
    /// answer for each partition.
    fn become_leader_or_follower(
        &mut self,
        states: &Bound<'_, PyAny>,
        broker_id: i32,
        log_dir_failed: bool,
    ) -> PyResult<(Vec<usize>, PartitionErrors)> {
        let hosted = &mut self.hosted;
        if let Ok(payload) = states.cast::<PartitionStates>() {
            let payload = payload.get();
            let Entries::LeaderAndIsr(entries) = &payload.entries else {
                return Err(PyTypeError::new_err(
                    "become_leader_or_follower takes a LeaderAndIsr request's partition states",
                ));
            };
            let answers = check_payload(hosted, payload, entries, |held, id, e| {
                hosted::become_leader_or_follower(
                    held,
                    id,
                    e.leader_epoch,
                    &e.replicas,
                    e.is_new,
                    broker_id,
                    log_dir_failed,
                )
            });
            return Ok((answers.accepted(), answers));
        }
        let mut read = StatesRead::default();
        for (i, state) in states.try_iter()?.enumerate() {
            let state = state?;
            let field = |name: &str| field(&state, "LeaderAndIsr", i, name);
            let (topic, partition) = read.key(&state, "LeaderAndIsr", i)?;
            let leader_epoch: i32 = field("leader_epoch")?
                .extract()
                .map_err(|e| invalid("LeaderAndIsr", i, "leader_epoch", e))?;
            let replicas: SmallVec<[i32; 3]> = field("replicas")?
                .extract()
                .map_err(|e| invalid("LeaderAndIsr", i, "replicas", e))?;
            let is_new = field("is_new")?.is_truthy()?;
            let held = hosted.topic(&topic);
            read.errors.push(hosted::become_leader_or_follower(
                held,
                partition,
                leader_epoch,
                &replicas,
                is_new,
                broker_id,
                log_dir_failed,
            ));
        }
        let answers = read.finish();
        Ok((answers.accepted(), answers))
    }

    /// `ReplicaManager.stopReplicas`' checks of each of `states` (a StopReplica request's), in
    /// order: the indices of the accepted states (a deleted partition is no longer held) and the
    /// answer for each partition.
    fn stop_replicas(
        &mut self,
        states: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<usize>, PartitionErrors)> {
        let hosted = &mut self.hosted;
        if let Ok(payload) = states.cast::<PartitionStates>() {
            let payload = payload.get();
            let Entries::StopReplica(entries) = &payload.entries else {
                return Err(PyTypeError::new_err(
                    "stop_replicas takes a StopReplica request's partition states",
                ));
            };
            let answers = check_payload(hosted, payload, entries, |held, id, e| {
                hosted::stop_replica(held, id, e.leader_epoch, e.delete)
            });
            return Ok((answers.accepted(), answers));
        }
        let mut read = StatesRead::default();
        for (i, state) in states.try_iter()?.enumerate() {
            let state = state?;
            let (topic, partition) = read.key(&state, "StopReplica", i)?;
            let leader_epoch: i32 = field(&state, "StopReplica", i, "leader_epoch")?
                .extract()
                .map_err(|e| invalid("StopReplica", i, "leader_epoch", e))?;
            let delete = field(&state, "StopReplica", i, "delete_partition")?.is_truthy()?;
            let held = hosted.topic(&topic);
            read.errors
                .push(hosted::stop_replica(held, partition, leader_epoch, delete));
        }
        let answers = read.finish();
        Ok((answers.accepted(), answers))
    }
}

/// `check` of each entry of a native payload, its topic's hosted partitions looked up once per
/// run of the topic; the answers keyed as the payload is (which names each partition once).
fn check_payload<E>(
    hosted: &mut hosted::HostedPartitions,
    payload: &PartitionStates,
    entries: &[E],
    mut check: impl FnMut(&mut hosted::TopicHosted, i32, &E) -> PartitionError,
) -> PartitionErrors {
    let mut entries = entries.iter();
    let mut errors = Vec::with_capacity(entries.len());
    let mut ids = payload.partitions.iter();
    for (topic, n) in &payload.topics {
        let held = hosted.topic(topic);
        for (e, &id) in entries.by_ref().zip(ids.by_ref()).take(*n) {
            errors.push(check(held, id, e));
        }
    }
    PartitionErrors::new(
        payload.topics.clone(),
        payload.partitions.clone(),
        errors,
        true,
    )
}

/// The keys and answers of a request's state objects (the reference engine's), read one by one.
#[derive(Default)]
struct StatesRead {
    topics: Vec<(Arc<str>, usize)>,
    partitions: Vec<i32>,
    errors: Vec<PartitionError>,
    seen: HashSet<(Arc<str>, i32)>,
}

impl StatesRead {
    /// The topic and partition of the `i`th state, appended to the keys.
    fn key(&mut self, state: &Bound<'_, PyAny>, api: &str, i: usize) -> PyResult<(Arc<str>, i32)> {
        let topic = field(state, api, i, "topic")?;
        let topic = topic
            .cast::<PyString>()
            .map_err(|e| invalid(api, i, "topic", e.into()))?
            .to_str()?;
        let partition: i32 = field(state, api, i, "partition")?
            .extract()
            .map_err(|e| invalid(api, i, "partition", e))?;
        let topic: Arc<str> = match self.topics.last_mut() {
            Some((last, n)) if **last == *topic => {
                *n += 1;
                last.clone()
            }
            _ => {
                let name: Arc<str> = Arc::from(topic);
                self.topics.push((name.clone(), 1));
                name
            }
        };
        self.seen.insert((topic.clone(), partition));
        self.partitions.push(partition);
        Ok((topic, partition))
    }

    fn finish(self) -> PartitionErrors {
        let unique = self.seen.len() == self.partitions.len();
        PartitionErrors::new(self.topics, self.partitions, self.errors, unique)
    }
}

fn field<'py>(
    state: &Bound<'py, PyAny>,
    api: &str,
    i: usize,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    state.getattr(name).map_err(|e| invalid(api, i, name, e))
}

/// A TypeError naming the partition state and field that could not be read.
fn invalid(api: &str, i: usize, name: &str, error: PyErr) -> PyErr {
    PyTypeError::new_err(format!(
        "{api} partition state {i}: cannot read {name}: {error}"
    ))
}

/// The per-partition answers of one LeaderAndIsr or StopReplica request: a read-only mapping of
/// `TopicPartition` to `kctl.errors.Errors` (a `collections.abc.Mapping`), as Kafka's response
/// carries them. The dict is made when something first looks a partition up; `len` and
/// `values()` (the controller's question: did any partition fail on a storage error?) read the
/// codes.
#[pyclass(module = "kctl._engine", frozen, mapping)]
pub struct PartitionErrors {
    topics: Vec<(Arc<str>, usize)>,
    partitions: Vec<i32>,
    errors: Vec<PartitionError>,
    /// No partition is named twice (else the dict, where a later answer replaced an earlier
    /// one, has fewer entries than `errors`).
    unique: bool,
    dict: PyOnceLock<Py<PyDict>>,
}

impl PartitionErrors {
    fn new(
        topics: Vec<(Arc<str>, usize)>,
        partitions: Vec<i32>,
        errors: Vec<PartitionError>,
        unique: bool,
    ) -> Self {
        Self {
            topics,
            partitions,
            errors,
            unique,
            dict: PyOnceLock::new(),
        }
    }

    /// The indices of the partitions answered NONE.
    fn accepted(&self) -> Vec<usize> {
        (self.errors.iter().enumerate())
            .filter(|(_, e)| **e == PartitionError::None)
            .map(|(i, _)| i)
            .collect()
    }

    fn dict<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyDict>> {
        if let Some(dict) = self.dict.get(py) {
            return Ok(dict.bind(py));
        }
        let named = rows::named(&self.topics, &self.partitions, None)?;
        let keys = interned::keys(&named, py)?;
        let classes = classes(py)?;
        let dict = PyDict::new(py);
        for (key, e) in keys.iter().zip(&self.errors) {
            dict.set_item(key, classes.partition_error(py, *e))?;
        }
        Ok(self.dict.get_or_init(py, || dict.unbind()).bind(py))
    }
}

#[pymethods]
impl PartitionErrors {
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        if self.unique {
            return Ok(self.errors.len());
        }
        Ok(self.dict(py)?.len())
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        tp: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.as_any().get_item(tp)
    }

    fn __contains__(&self, py: Python<'_>, tp: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.dict(py)?.contains(tp)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        self.dict(py)?.as_any().try_iter()
    }

    #[pyo3(signature = (tp, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        tp: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self.dict(py)?.get_item(tp)? {
            Some(error) => error,
            None => default.unwrap_or_else(|| py.None().into_bound(py)),
        })
    }

    fn keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.call_method0("keys")
    }

    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dict(py)?.call_method0("items")
    }

    /// The answers, in order: a list made from the codes (the mapping's dict stays unmade).
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        if !self.unique {
            return Ok(self.dict(py)?.values());
        }
        let classes = classes(py)?;
        PyList::new(
            py,
            self.errors.iter().map(|e| classes.partition_error(py, *e)),
        )
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let theirs = match other.cast::<PartitionErrors>() {
            Ok(errors) => errors.get().dict(py)?.clone().into_any(),
            Err(_) => other.clone(),
        };
        self.dict(py)?.as_any().eq(theirs)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.dict(py)?.repr()?.to_string())
    }
}
