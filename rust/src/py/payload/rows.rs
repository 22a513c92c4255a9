//! `PartitionStates.rows()`: a LeaderAndIsr or StopReplica payload as plain tuples, one per
//! partition, for the simulated broker. Its agent and replica manager read a few fields of each
//! state; a tuple costs a small part of a `*PartitionState` dataclass built through its Python
//! `__init__` (restarting the controller's broker at 100 brokers sends 300,000 states), and the
//! payload the broker keeps in its record of answers stays native.

use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use super::{Entries, PartitionStates};
use crate::hash::HashMap;
use crate::model::Brokers;
use crate::py::classes::classes;
use crate::requests::{HasHead, LeaderAndIsrEntry, StopReplicaEntry};

/// The rows of `states` at `indices` (ascending; None: all), in order: `(tp, controller_epoch,
/// leader, leader_epoch, isr, partition_epoch, replicas, adding_replicas, is_new)` for
/// LeaderAndIsr, `(tp, leader_epoch, delete_partition)` for StopReplica; `tp` is a
/// `TopicPartition` (see `keys`).
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
    let Entries::LeaderAndIsr(entries) = &states.entries else {
        return Ok(None);
    };
    let named = named(&states.topics, &states.partitions, indices)?;
    Ok(Some(
        named
            .into_iter()
            .map(|(topic, id, i)| (topic, id, &entries[i]))
            .collect(),
    ))
}

/// The StopReplica entries of `states` at `indices` (see `leader_and_isr_entries`).
pub(crate) fn stop_replica_entries<'a>(
    states: &'a PartitionStates,
    indices: Option<&[usize]>,
) -> PyResult<Option<Vec<Named<'a, StopReplicaEntry>>>> {
    let Entries::StopReplica(entries) = &states.entries else {
        return Ok(None);
    };
    let named = named(&states.topics, &states.partitions, indices)?;
    Ok(Some(
        named
            .into_iter()
            .map(|(topic, id, i)| (topic, id, &entries[i]))
            .collect(),
    ))
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

/// The `TopicPartition` of each of `named`'s partitions, with the topic's interned string: the
/// one made for that partition by an earlier payload's rows (see `KEYS`), or a new one, built as
/// `tuple.__new__` builds it (without the NamedTuple's Python constructor). The lock is never held
/// while Python runs.
pub(crate) fn keys<'py>(
    named: &[(&Arc<str>, i32, usize)],
    py: Python<'py>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut found: Vec<Option<Bound<'py, PyAny>>> = Vec::with_capacity(named.len());
    {
        let known = KEYS.lock().unwrap_or_else(PoisonError::into_inner);
        let mut last: Option<(&Arc<str>, Option<&TopicKeys>)> = None;
        for &(topic, id, _) in named {
            let of_topic = match last {
                Some((t, keys)) if Arc::ptr_eq(t, topic) => keys,
                _ => known.get(&**topic),
            };
            last = Some((topic, of_topic));
            found.push(
                of_topic
                    .and_then(|keys| keys.get(&id))
                    .map(|key| key.bind(py).clone()),
            );
        }
    }
    if found.iter().all(Option::is_some) {
        return Ok(found.into_iter().flatten().collect());
    }
    let class = classes(py)?.topic_partition.bind(py);
    let new = py.get_type::<PyTuple>().getattr(intern!(py, "__new__"))?;
    let mut made: Vec<(usize, Bound<'py, PyAny>)> = Vec::new();
    for (i, (&(topic, id, _), key)) in named.iter().zip(&found).enumerate() {
        if key.is_none() {
            let name = PyString::intern(py, topic);
            made.push((i, new.call1((class, (&name, id)))?));
        }
    }
    let mut known = KEYS.lock().unwrap_or_else(PoisonError::into_inner);
    for (i, key) in made {
        let (topic, id, _) = named[i];
        let of_topic = known.entry(topic.clone()).or_default();
        // Another thread's rows may have made one meanwhile: theirs is the one kept.
        let kept = of_topic.entry(id).or_insert_with(|| key.unbind());
        found[i] = Some(kept.bind(py).clone());
    }
    drop(known);
    Ok(found.into_iter().flatten().collect())
}

/// A tuple of each of `lists` (ISRs, replicas, adding replicas): the one made for an equal list
/// by an earlier payload's rows (see `LISTS`), or a new one. The lock is never held while
/// Python runs.
fn broker_lists<'py>(lists: &[&[i32]], py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut found: Vec<Option<Bound<'py, PyTuple>>> = {
        let known = LISTS.lock().unwrap_or_else(PoisonError::into_inner);
        (lists.iter())
            .map(|list| known.get(*list).map(|t| t.bind(py).clone()))
            .collect()
    };
    let mut made = Vec::new();
    for (i, (list, tuple)) in lists.iter().zip(&found).enumerate() {
        if tuple.is_none() {
            made.push((i, PyTuple::new(py, *list)?));
        }
    }
    if !made.is_empty() {
        let mut known = LISTS.lock().unwrap_or_else(PoisonError::into_inner);
        for (i, tuple) in made {
            let kept =
                (known.entry(Brokers::from_slice(lists[i]))).or_insert_with(|| tuple.unbind());
            found[i] = Some(kept.bind(py).clone());
        }
    }
    Ok(found.into_iter().flatten().collect())
}

/// The tuple of each broker list some payload's rows carried, kept for the rows that carry an
/// equal one next: the simulated replicas then share a tuple per distinct list (a few per
/// replica set) instead of holding two or three each, and rows allocate none. Only a simulation
/// fills it, with an entry per distinct list it ever sent.
static LISTS: LazyLock<Mutex<HashMap<Brokers, Py<PyTuple>>>> = LazyLock::new(Default::default);

/// The `TopicPartition` of each partition some payload's rows named, by topic and partition id,
/// kept for the rows that name it next: the broker agents' and simulated replica managers' tables
/// then hold one key object per partition (not one per broker and table), and a row's key is
/// found in them by identity, without reading the stored key and its partition number, objects
/// of a hundred brokers' tables the processor's caches no longer hold. Only simulated brokers
/// read rows, so only a simulation fills it, with an entry per partition it ever had.
static KEYS: LazyLock<Mutex<HashMap<Arc<str>, TopicKeys>>> = LazyLock::new(Default::default);

/// The keys of one topic's partitions, by partition id.
type TopicKeys = HashMap<i32, Py<PyAny>>;
