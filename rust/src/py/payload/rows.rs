//! `PartitionStates.rows()`: a LeaderAndIsr or StopReplica payload as plain tuples, one per
//! partition, for the simulated broker. Its agent and replica manager read a few fields of each
//! state; a tuple costs a small part of a `*PartitionState` dataclass built through its Python
//! `__init__` (restarting the controller's broker at 100 brokers sends 300,000 states), and the
//! payload the broker keeps in its record of answers stays native.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use super::{Entries, PartitionStates};
use crate::py::classes::classes;
use crate::requests::HasHead;

/// The rows of `states`, in order: `(tp, controller_epoch, leader, leader_epoch, isr,
/// partition_epoch, replicas, adding_replicas, is_new)` for LeaderAndIsr, `(tp, leader_epoch,
/// delete_partition)` for StopReplica; `tp` is a `TopicPartition` (see `keys`).
pub(super) fn rows<'py>(states: &PartitionStates, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    let keys = keys(states, py)?;
    let rows: Vec<Bound<'py, PyTuple>> = match &states.entries {
        Entries::LeaderAndIsr(entries) => (keys.into_iter().zip(entries))
            .map(|(tp, e)| {
                let (controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas) =
                    e.head();
                let row = (
                    tp,
                    controller_epoch,
                    leader,
                    leader_epoch,
                    PyTuple::new(py, isr)?,
                    partition_epoch,
                    PyTuple::new(py, replicas)?,
                    PyTuple::new(py, e.adding())?,
                    e.is_new,
                );
                row.into_pyobject(py)
            })
            .collect::<PyResult<_>>()?,
        Entries::StopReplica(entries) => (keys.into_iter().zip(entries))
            .map(|(tp, e)| (tp, e.leader_epoch, e.delete).into_pyobject(py))
            .collect::<PyResult<_>>()?,
        Entries::UpdateMetadata(_) => {
            return Err(PyValueError::new_err(
                "UpdateMetadata states have no rows: a broker's metadata cache applies the payload whole",
            ))
        }
    };
    PyList::new(py, rows)
}

/// A `TopicPartition` per entry, with the topic's interned string: the one made for that
/// partition by an earlier payload's rows (see `KEYS`), or a new one, built as `tuple.__new__`
/// builds it (without the NamedTuple's Python constructor). The lock is never held while Python
/// runs.
fn keys<'py>(states: &PartitionStates, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut found: Vec<Option<Bound<'py, PyAny>>> = Vec::with_capacity(states.partitions.len());
    {
        let known = KEYS.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ids = states.partitions.iter();
        for (topic, n) in &states.topics {
            let of_topic = known.get(&**topic);
            for id in ids.by_ref().take(*n) {
                found.push(
                    of_topic
                        .and_then(|keys| keys.get(id))
                        .map(|key| key.bind(py).clone()),
                );
            }
        }
    }
    if found.iter().all(Option::is_some) {
        return Ok(found.into_iter().flatten().collect());
    }
    let class = classes(py)?.topic_partition.bind(py);
    let new = py.get_type::<PyTuple>().getattr(intern!(py, "__new__"))?;
    let mut made: Vec<(usize, Bound<'py, PyAny>)> = Vec::new();
    let mut slots = found.iter().enumerate();
    let mut ids = states.partitions.iter();
    for (topic, n) in &states.topics {
        let name = PyString::intern(py, topic);
        for (id, (i, key)) in ids.by_ref().zip(slots.by_ref()).take(*n) {
            if key.is_none() {
                made.push((i, new.call1((class, (&name, *id)))?));
            }
        }
    }
    let mut known = KEYS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut made = made.into_iter().peekable();
    let mut ids = states.partitions.iter().enumerate();
    for (topic, n) in &states.topics {
        for (i, id) in ids.by_ref().take(*n) {
            if let Some((_, key)) = made.next_if(|(at, _)| *at == i) {
                let of_topic = known.entry(topic.clone()).or_default();
                // Another thread's rows may have made one meanwhile: theirs is the one kept.
                let kept = of_topic.entry(*id).or_insert_with(|| key.unbind());
                found[i] = Some(kept.bind(py).clone());
            }
        }
    }
    drop(known);
    Ok(found.into_iter().flatten().collect())
}

/// The `TopicPartition` of each partition some payload's rows named, by topic and partition id,
/// kept for the rows that name it next: the broker agents' and simulated replica managers' tables
/// then hold one key object per partition (not one per broker and table), and a row's key is
/// found in them by identity, without reading the stored key and its partition number, objects
/// of a hundred brokers' tables the processor's caches no longer hold. Only simulated brokers
/// read rows, so only a simulation fills it, with an entry per partition it ever had.
static KEYS: LazyLock<Mutex<HashMap<Arc<str>, TopicKeys>>> = LazyLock::new(Default::default);

/// The keys of one topic's partitions, by partition id.
type TopicKeys = HashMap<i32, Py<PyAny>>;
