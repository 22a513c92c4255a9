//! `PartitionStates.rows()`: a LeaderAndIsr or StopReplica payload as plain tuples, one per
//! partition, for the simulated broker. Its agent and replica manager read a few fields of each
//! state; a tuple costs a small part of a `*PartitionState` dataclass built through its Python
//! `__init__` (restarting the controller's broker at 100 brokers sends 300,000 states), and the
//! payload the broker keeps in its record of answers stays native.

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

/// A `TopicPartition` per entry, built as `tuple.__new__` builds it (without the NamedTuple's
/// Python constructor), with the topic's interned string: the replicas' and epochs' dicts the
/// broker looks the key up in hold keys of earlier rows, and an equal key with the same string
/// object compares without reading the characters.
fn keys<'py>(states: &PartitionStates, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let class = classes(py)?.topic_partition.bind(py);
    let new = py.get_type::<PyTuple>().getattr(intern!(py, "__new__"))?;
    let mut keys = Vec::with_capacity(states.partitions.len());
    let mut ids = states.partitions.iter();
    for (topic, n) in &states.topics {
        let name = PyString::intern(py, topic);
        for id in ids.by_ref().take(*n) {
            keys.push(new.call1((class, (&name, *id)))?);
        }
    }
    Ok(keys)
}
