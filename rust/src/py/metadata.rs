//! `kctl._engine.MetadataCache`: the partition states of a simulated broker's metadata cache.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::metadata::{
    key_at, metadata_digest as digest, Applied, MetadataCache as Cache, Payload,
};
use crate::model::Brokers;
use crate::py::payload::PartitionStates;
use crate::py::statetable::StateTable;
use crate::requests::{UpdateMetadataEntries, UpdateMetadataEntry};

/// `(controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas, offline_replicas)`:
/// the fields of `kctl.requests.UpdateMetadataPartitionState` after its key.
type StateTuple = (i32, i32, i32, Brokers, i32, Brokers, Brokers);

fn state_tuple(e: &UpdateMetadataEntry) -> StateTuple {
    (
        e.controller_epoch,
        e.leader,
        e.leader_epoch,
        e.isr.clone(),
        e.partition_epoch,
        e.replicas.clone(),
        e.offline_replicas.clone(),
    )
}

/// A payload's topic runs, partition ids and entries.
type Built = (Vec<(Arc<str>, usize)>, Vec<i32>, Payload);

/// A payload built from `kctl.requests.UpdateMetadataPartitionState` objects (the reference
/// engine's requests), in the shape of a native one: keys and entries.
fn payload_of(states: &Bound<'_, PyAny>) -> PyResult<Built> {
    let mut runs: Vec<(Arc<str>, usize)> = Vec::new();
    let mut ids = Vec::new();
    let mut entries = Vec::new();
    for item in states.try_iter()? {
        let item = item?;
        let topic: String = item.getattr("topic")?.extract()?;
        let partition: i32 = item.getattr("partition")?.extract()?;
        if partition < 0 {
            return Err(PyValueError::new_err(format!(
                "invalid partition {topic}-{partition} in UpdateMetadata: partition ids are not negative"
            )));
        }
        let entry = UpdateMetadataEntry {
            part: 0,
            controller_epoch: item.getattr("controller_epoch")?.extract()?,
            leader: item.getattr("leader")?.extract()?,
            leader_epoch: item.getattr("leader_epoch")?.extract()?,
            isr: item.getattr("isr")?.extract()?,
            partition_epoch: item.getattr("partition_epoch")?.extract()?,
            replicas: item.getattr("replicas")?.extract()?,
            offline_replicas: item.getattr("offline_replicas")?.extract()?,
        };
        // Consecutive states of one topic are one run, as a native payload's are.
        match runs.last_mut() {
            Some((last, n)) if **last == *topic => *n += 1,
            _ => runs.push((topic.into(), 1)),
        }
        ids.push(partition);
        entries.push(entry);
    }
    Ok((runs, ids, Arc::new(UpdateMetadataEntries::new(entries))))
}

#[pyclass(module = "kctl._engine")]
#[derive(Default)]
pub struct MetadataCache {
    cache: Cache,
}

#[pymethods]
impl MetadataCache {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Apply an UpdateMetadata request's partition states (a native payload is shared with the
    /// other brokers' caches, without a Python object per partition, and applied once per cache
    /// state; any other sequence of `UpdateMetadataPartitionState` is read state by state).
    /// Returns the `(topic, partition)`s removed by a leader of -2.
    fn update(&mut self, states: &Bound<'_, PyAny>) -> PyResult<Vec<(String, i32)>> {
        let native = states.cast::<PartitionStates>().ok();
        let view = native.as_ref().and_then(|p| p.get().update_metadata());
        let (built, alone);
        let (keys, payload, applied) = match view {
            Some(view) => view,
            None => {
                (built, alone) = (payload_of(states)?, Applied::default());
                ((&built.0[..], &built.1[..]), &built.2, &alone)
            }
        };
        Ok(self
            .cache
            .apply(keys, payload, applied)
            .into_iter()
            .map(|i| key_at(keys, i))
            .map(|(topic, partition)| (topic.to_string(), partition))
            .collect())
    }

    fn get(&self, topic: &str, partition: i32) -> Option<StateTuple> {
        self.cache.get(topic, partition).as_ref().map(state_tuple)
    }

    fn has_topic(&self, topic: &str) -> bool {
        self.cache.has_topic(topic)
    }

    /// Every cached partition as `(topic, partition, state tuple)`, sorted by key.
    fn items(&self) -> Vec<(String, i32, StateTuple)> {
        let mut items: Vec<_> = self
            .cache
            .iter()
            .map(|(t, p, s)| (t.to_owned(), p, state_tuple(&s)))
            .collect();
        items.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        items
    }

    fn __len__(&self) -> usize {
        self.cache.len()
    }

    /// The wrapping sum of the cached partitions' `metadata_digest`s.
    #[getter]
    fn digest(&self) -> u64 {
        self.cache.digest()
    }
}

/// The digest of one partition's metadata as a cache and the store must agree on it.
#[pyfunction]
pub fn metadata_digest(
    topic: &str,
    partition: i32,
    leader: i32,
    leader_epoch: i32,
    isr: Vec<i32>,
    partition_epoch: i32,
    replicas: Vec<i32>,
) -> u64 {
    digest(
        topic,
        partition,
        leader,
        leader_epoch,
        &isr,
        partition_epoch,
        &replicas,
    )
}

/// The `metadata_digest` of each of `topic`'s `partitions` as stored in `table` with the replicas
/// `replicas` gives it (None for a partition without a readable state), read in place: a store's
/// partition states rewritten between two checks of a simulated cluster are tens of thousands.
#[pyfunction]
pub fn stored_digests(
    table: &StateTable,
    topic: &str,
    partitions: Vec<i32>,
    replicas: &Bound<'_, PyDict>,
) -> PyResult<Vec<Option<u64>>> {
    // Read from Python before the table is locked: nothing it runs can then wait for the lock.
    let assigned: Vec<(i32, Brokers)> = (partitions.into_iter())
        .map(|partition| match replicas.get_item(partition)? {
            Some(brokers) => Ok((partition, brokers.extract()?)),
            None => Err(PyValueError::new_err(format!(
                "no replicas given for {topic}-{partition}"
            ))),
        })
        .collect::<PyResult<_>>()?;
    let table = table.lock();
    Ok((assigned.into_iter())
        .map(|(partition, replicas)| {
            let stored = table.get(topic, partition)?.state.as_ref()?;
            let lai = &stored.leader_and_isr;
            Some(digest(
                topic,
                partition,
                lai.leader,
                lai.leader_epoch,
                &lai.isr,
                lai.partition_epoch,
                &replicas,
            ))
        })
        .collect())
}

/// Put each of `partitions`' digest in `stored` (None: it has none) in `digests`, the digests by
/// partition of a topic; returns how much the sum of `digests` grew (wrapping, as digests sum).
#[pyfunction]
pub fn fold_digests(
    digests: &Bound<'_, PyDict>,
    partitions: Vec<i32>,
    stored: Vec<Option<u64>>,
) -> PyResult<u64> {
    if partitions.len() != stored.len() {
        return Err(PyValueError::new_err(format!(
            "{} partitions but {} digests",
            partitions.len(),
            stored.len()
        )));
    }
    let mut grown = 0u64;
    for (partition, digest) in partitions.into_iter().zip(stored) {
        if let Some(old) = digests.get_item(partition)? {
            grown = grown.wrapping_sub(old.extract()?);
            digests.del_item(partition)?;
        }
        if let Some(digest) = digest {
            digests.set_item(partition, digest)?;
            grown = grown.wrapping_add(digest);
        }
    }
    Ok(grown)
}
