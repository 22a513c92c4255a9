//! `kctl._engine.PartitionStates`: the partition states of one sent request, kept native until
//! something in Python looks at them. A controller on the native engine builds no Python object
//! per partition for the requests it sends; a simulated broker that reads a payload materialises
//! it once (an UpdateMetadata payload shared by every broker is one object).

use std::sync::{Arc, OnceLock};

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyIterator, PyTuple};

use crate::context::{Context, Part};
use crate::kafkawire;
use crate::metadata::{Applied, Keys, Payload};
use crate::py::classes::classes;
use crate::requests::{HasHead, Head, LeaderAndIsrEntry, StopReplicaEntry, UpdateMetadataEntry};

mod hosted;
mod interned;
mod rows;

pub use hosted::{HostedPartitions, PartitionErrors};
pub(crate) use interned::keys;
pub use interned::sizes as interned_sizes;
pub(crate) use rows::{leader_and_isr_entries, stop_replica_entries};

pub type UpdateMetadataView<'a> = (Keys<'a>, &'a Payload, &'a Applied);

pub enum Entries {
    LeaderAndIsr(Vec<LeaderAndIsrEntry>),
    /// Shared: one payload goes to every broker of an UpdateMetadata fan-out.
    UpdateMetadata(Payload),
    StopReplica(Vec<StopReplicaEntry>),
}

/// A read-only sequence of `*PartitionState` request objects (the classes `kctl._engine.bind` took), equal to the tuple the
/// reference engine sends.
#[pyclass(module = "kctl._engine", frozen, sequence)]
pub struct PartitionStates {
    /// The topic of each run of entries of one topic and the run's length (the context may drop
    /// a topic before Python looks): a name reference per topic, where one per entry cost a
    /// broker failure at 1M partitions 90K counts up and down.
    topics: Vec<(Arc<str>, usize)>,
    /// The partition id of each entry.
    partitions: Vec<i32>,
    /// `(topic, partition)` of each entry, made when something first reads them.
    keys: OnceLock<Vec<(Arc<str>, i32)>>,
    entries: Entries,
    materialized: PyOnceLock<Py<PyTuple>>,
    /// What the broker caches that apply an UpdateMetadata payload share (its entries' digests,
    /// computed by the first for all the others, and the cache states it led to).
    applied: Applied,
}

impl PartitionStates {
    pub fn new(ctx: &Context, entries: Entries) -> Self {
        let (topics, partitions) = match &entries {
            Entries::LeaderAndIsr(es) => named(ctx, es.iter().map(|e| e.part)),
            Entries::UpdateMetadata(es) => named(ctx, es.iter().map(|e| e.part)),
            Entries::StopReplica(es) => named(ctx, es.iter().map(|e| e.part)),
        };
        Self {
            topics,
            partitions,
            keys: OnceLock::new(),
            entries,
            materialized: PyOnceLock::new(),
            applied: Applied::default(),
        }
    }

    fn keys(&self) -> &[(Arc<str>, i32)] {
        self.keys.get_or_init(|| {
            let names = (self.topics.iter()).flat_map(|(name, n)| std::iter::repeat_n(name, *n));
            names
                .zip(&self.partitions)
                .map(|(name, id)| (name.clone(), *id))
                .collect()
        })
    }

    /// The keys (topic runs and partition ids: no key per entry made), entries and shared
    /// application of an UpdateMetadata payload (None for the others).
    pub fn update_metadata(&self) -> Option<UpdateMetadataView<'_>> {
        let Entries::UpdateMetadata(entries) = &self.entries else {
            return None;
        };
        Some(((&self.topics, &self.partitions), entries, &self.applied))
    }

    fn materialized<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if let Some(done) = self.materialized.get(py) {
            return Ok(done.bind(py).clone());
        }
        let items = self.build(py)?;
        let tuple = PyTuple::new(py, items)?.unbind();
        Ok(self.materialized.get_or_init(py, || tuple).bind(py).clone())
    }

    fn build<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let classes = classes(py)?;
        let keys = self.keys();
        let mut out = Vec::with_capacity(keys.len());
        match &self.entries {
            Entries::LeaderAndIsr(entries) => {
                let cls = classes.leader_and_isr_partition_state.bind(py);
                for (key, e) in keys.iter().zip(entries) {
                    let mut args = head(py, key, e.head())?;
                    args.push(PyTuple::new(py, e.adding())?.into_any());
                    args.push(PyTuple::new(py, e.removing())?.into_any());
                    args.push(pyo3::types::PyBool::new(py, e.is_new).to_owned().into_any());
                    args.push(classes.recovery_state(py, e.recovery).clone());
                    out.push(cls.call1(PyTuple::new(py, args)?)?);
                }
            }
            Entries::UpdateMetadata(entries) => {
                let cls = classes.update_metadata_partition_state.bind(py);
                for (key, e) in keys.iter().zip(entries.iter()) {
                    let mut args = head(py, key, e.head())?;
                    args.push(PyTuple::new(py, &e.offline_replicas)?.into_any());
                    out.push(cls.call1(PyTuple::new(py, args)?)?);
                }
            }
            Entries::StopReplica(entries) => {
                let cls = classes.stop_replica_partition_state.bind(py);
                for ((topic, partition), e) in keys.iter().zip(entries) {
                    out.push(cls.call1((&**topic, *partition, e.leader_epoch, e.delete))?);
                }
            }
        }
        Ok(out)
    }
}

/// The topic runs and partition ids of the entries' partitions, in order.
fn named(ctx: &Context, parts: impl Iterator<Item = Part>) -> (Vec<(Arc<str>, usize)>, Vec<i32>) {
    let mut topics: Vec<(Arc<str>, usize)> = Vec::new();
    let mut partitions = Vec::with_capacity(parts.size_hint().0);
    let mut last = None;
    for p in parts {
        let t = ctx.partition_topic(p);
        match topics.last_mut() {
            Some((_, n)) if last == Some(t) => *n += 1,
            _ => {
                topics.push((ctx.topic_name_arc(t), 1));
                last = Some(t);
            }
        }
        partitions.push(ctx.partition_id(p));
    }
    (topics, partitions)
}

fn head<'py>(
    py: Python<'py>,
    (topic, partition): &(Arc<str>, i32),
    (controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas): Head<'_>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    Ok(vec![
        pyo3::types::PyString::new(py, topic).into_any(),
        partition.into_pyobject(py)?.into_any(),
        controller_epoch.into_pyobject(py)?.into_any(),
        leader.into_pyobject(py)?.into_any(),
        leader_epoch.into_pyobject(py)?.into_any(),
        PyTuple::new(py, isr)?.into_any(),
        partition_epoch.into_pyobject(py)?.into_any(),
        PyTuple::new(py, replicas)?.into_any(),
    ])
}

#[pymethods]
impl PartitionStates {
    fn __len__(&self) -> usize {
        self.partitions.len()
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.materialized(py)?.as_any().get_item(index)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyIterator>> {
        self.materialized(py)?.as_any().try_iter()
    }

    fn __contains__(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.materialized(py)?.contains(item)
    }

    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        if !matches!(op, CompareOp::Eq | CompareOp::Ne) {
            return Ok(py.NotImplemented());
        }
        let theirs = match other.cast::<PartitionStates>() {
            Ok(states) => states.get().materialized(py)?.into_any(),
            Err(_) => other.clone(),
        };
        Ok(self
            .materialized(py)?
            .as_any()
            .rich_compare(theirs, op)?
            .unbind())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        self.materialized(py)?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.materialized(py)?.repr()?.to_string())
    }

    /// The topics named, each once, in order of first appearance.
    fn topics(&self) -> Vec<&str> {
        let mut seen = crate::hash::IndexSet::default();
        for (topic, _) in &self.topics {
            seen.insert(&**topic);
        }
        seen.into_iter().collect()
    }

    /// Kafka's wire bytes of these states at `version` of their request (the
    /// `ungrouped_partition_states` or `topic_states` field, length prefix included), written
    /// without the GIL; `topic_ids` maps topic names to their 16-byte ids (others get zeroes).
    fn kafka_encode<'py>(
        &self,
        py: Python<'py>,
        version: i16,
        topic_ids: std::collections::HashMap<String, [u8; 16]>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let ids: crate::hash::NameMap<String, kafkawire::TopicId> = topic_ids.into_iter().collect();
        let keys = self.keys();
        let encoded = py.detach(|| match &self.entries {
            Entries::LeaderAndIsr(es) => {
                kafkawire::encode_states(&kafkawire::LEADER_AND_ISR, keys, es, version, &ids)
            }
            Entries::UpdateMetadata(es) => {
                let es: Vec<&UpdateMetadataEntry> = es.iter().collect();
                kafkawire::encode_states(&kafkawire::UPDATE_METADATA, keys, &es, version, &ids)
            }
            Entries::StopReplica(_) => Err(kafkawire::WireError(
                "StopReplica states are small: kctl.kafka.protocol writes them".to_string(),
            )),
        });
        encoded
            .map(|bytes| PyBytes::new(py, &bytes))
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.0))
    }

    /// A LeaderAndIsr or StopReplica payload as a list of plain tuples (see `payload::rows`), of
    /// the states at `indices` (ascending) or all, for the simulated broker's agent and replica
    /// manager; a ValueError for UpdateMetadata.
    #[pyo3(signature = (indices = None))]
    fn rows<'py>(
        &self,
        py: Python<'py>,
        indices: Option<Vec<usize>>,
    ) -> PyResult<Bound<'py, pyo3::types::PyList>> {
        rows::rows(self, py, indices.as_deref())
    }

    /// The partitions a StopReplica payload deletes (empty for other requests).
    fn deleted(&self) -> Vec<(&str, i32)> {
        let Entries::StopReplica(entries) = &self.entries else {
            return Vec::new();
        };
        self.keys()
            .iter()
            .zip(entries)
            .filter(|(_, e)| e.delete)
            .map(|((topic, partition), _)| (&**topic, *partition))
            .collect()
    }
}
