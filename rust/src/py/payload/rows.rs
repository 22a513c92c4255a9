//! `PartitionStates.rows()`: a LeaderAndIsr or StopReplica payload as plain tuples, one per
//! partition, for the simulated broker. Its agent and replica manager read a few fields of each
//! state; a tuple costs a small part of a `*PartitionState` dataclass built through its Python
//! `__init__` (restarting the controller's broker at 100 brokers sends 300,000 states), and the
//! payload the broker keeps in its record of answers stays native.

use std::ops::Index;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::interned::{broker_lists, keys};
use super::{Entries, PartitionStates};
use crate::requests::{HasHead, LeaderAndIsrEntry, StopReplicaEntry};

/// The rows of `states` at `indices` (ascending; None: all), in order: `(tp, controller_epoch,
/// leader, leader_epoch, isr, partition_epoch, replicas, adding_replicas, is_new)` for
/// LeaderAndIsr, `(tp, leader_epoch, delete_partition)` for StopReplica; `tp` is a
/// `TopicPartition` (see `interned::keys`).
pub(super) fn rows<'py>(
    states: &PartitionStates,
    py: Python<'py>,
    indices: Option<&[usize]>,
) -> PyResult<Bound<'py, PyList>> {
    let named = named(&states.topics, &states.partitions, indices)?;
    let keys = keys(&named, py)?;
    let at = named.iter().map(|(_, _, i)| *i);
    let rows: Vec<Bound<'py, PyTuple>> = match &states.entries {
        Entries::LeaderAndIsr(entries) => {
            let lists: Vec<&[i32]> = (named.iter())
                .flat_map(|(_, _, i)| {
                    let e = &entries[*i];
                    [&e.isr[..], &e.replicas[..], e.adding()]
                })
                .collect();
            let mut lists = broker_lists(&lists, py)?.into_iter();
            let mut list = move || lists.next().expect("three lists per row");
            (keys.into_iter().zip(at))
                .map(|(tp, i)| {
                    let e = &entries[i];
                    let (controller_epoch, leader, leader_epoch, _, partition_epoch, _) = e.head();
                    let row = (
                        tp,
                        controller_epoch,
                        leader,
                        leader_epoch,
                        list(),
                        partition_epoch,
                        list(),
                        list(),
                        e.is_new,
                    );
                    row.into_pyobject(py)
                })
                .collect::<PyResult<_>>()?
        }
        Entries::StopReplica(entries) => (keys.into_iter().zip(at))
            .map(|(tp, i)| (tp, entries[i].leader_epoch, entries[i].delete).into_pyobject(py))
            .collect::<PyResult<_>>()?,
        Entries::UpdateMetadata(_) => {
            return Err(PyValueError::new_err(
                "UpdateMetadata states have no rows: a broker's metadata cache applies the payload whole",
            ))
        }
    };
    PyList::new(py, rows)
}

/// An entry of a payload with its topic and partition id.
pub(crate) type Named<'a, E> = (&'a Arc<str>, i32, &'a E);

/// The LeaderAndIsr entries of `states` at `indices` (ascending; None: all) with their topic and
/// partition id, for the native data plane (which reads them without rows); None for another
/// request's payload.
pub(crate) fn leader_and_isr_entries<'a>(
    states: &'a PartitionStates,
    indices: Option<&[usize]>,
) -> PyResult<Option<Vec<Named<'a, LeaderAndIsrEntry>>>> {
    match &states.entries {
        Entries::LeaderAndIsr(entries) => named_entries(states, entries, indices).map(Some),
        _ => Ok(None),
    }
}

/// The StopReplica entries of `states` at `indices` (see `leader_and_isr_entries`).
pub(crate) fn stop_replica_entries<'a>(
    states: &'a PartitionStates,
    indices: Option<&[usize]>,
) -> PyResult<Option<Vec<Named<'a, StopReplicaEntry>>>> {
    match &states.entries {
        Entries::StopReplica(entries) => named_entries(states, entries, indices).map(Some),
        _ => Ok(None),
    }
}

/// `entries` (the payload's own, of one request) at `indices`, with their topic and partition id.
fn named_entries<'a, E, L: Index<usize, Output = E> + ?Sized>(
    states: &'a PartitionStates,
    entries: &'a L,
    indices: Option<&[usize]>,
) -> PyResult<Vec<Named<'a, E>>> {
    let named = named(&states.topics, &states.partitions, indices)?;
    Ok(named
        .into_iter()
        .map(|(topic, id, i)| (topic, id, &entries[i]))
        .collect())
}

/// `(topic, partition id, index)` of the entries at `indices` (ascending; None: every entry) of
/// the topic runs `topics` and partition ids `partitions`; a ValueError for an index out of
/// range or out of order.
pub(super) fn named<'a>(
    topics: &'a [(Arc<str>, usize)],
    partitions: &[i32],
    indices: Option<&[usize]>,
) -> PyResult<Vec<(&'a Arc<str>, i32, usize)>> {
    let mut runs = topics
        .iter()
        .flat_map(|(topic, n)| std::iter::repeat_n(topic, *n));
    let Some(indices) = indices else {
        return Ok((runs.zip(partitions).enumerate())
            .map(|(i, (topic, id))| (topic, *id, i))
            .collect());
    };
    let mut out = Vec::with_capacity(indices.len());
    let mut next = 0; // the index `runs` yields next
    for &i in indices {
        if i < next || i >= partitions.len() {
            return Err(PyValueError::new_err(format!(
                "index {i} is out of range or order (the indices of {} states, ascending)",
                partitions.len()
            )));
        }
        let topic = runs.nth(i - next).expect("fewer indices than states");
        out.push((topic, partitions[i], i));
        next = i + 1;
    }
    Ok(out)
}
