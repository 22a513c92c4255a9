//! `kctl._engine.MetadataCache`: the partition states of a simulated broker's metadata cache.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::context::Replicas;
use crate::metadata::{metadata_digest as digest, CachedState, MetadataCache as Cache};
use crate::py::payload::PartitionStates;

/// `(controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas, offline_replicas)`:
/// the fields of `kctl.requests.UpdateMetadataPartitionState` after its key.
type StateTuple = (i32, i32, i32, Vec<i32>, i32, Vec<i32>, Vec<i32>);

fn state_tuple(s: &CachedState) -> StateTuple {
    (
        s.controller_epoch,
        s.leader,
        s.leader_epoch,
        s.isr.to_vec(),
        s.partition_epoch,
        s.replicas.to_vec(),
        s.offline_replicas.to_vec(),
    )
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

    /// Apply an UpdateMetadata request's partition states (a native payload without building a
    /// Python object per partition; any other sequence of `UpdateMetadataPartitionState` state by
    /// state). Returns the `(topic, partition)`s removed by a leader of -2.
    fn update(&mut self, states: &Bound<'_, PyAny>) -> PyResult<Vec<(String, i32)>> {
        let mut removed = Vec::new();
        if let Some((keys, entries, digests)) = states
            .cast::<PartitionStates>()
            .ok()
            .and_then(|payload| payload.get().update_metadata())
        {
            for (((topic, partition), e), &digest) in keys.iter().zip(entries).zip(digests) {
                let state = CachedState {
                    controller_epoch: e.controller_epoch,
                    leader: e.leader,
                    leader_epoch: e.leader_epoch,
                    isr: e.isr.clone(),
                    partition_epoch: e.partition_epoch,
                    replicas: e.replicas.clone(),
                    offline_replicas: e.offline_replicas.clone(),
                };
                if self.cache.apply(topic, *partition, state, digest) {
                    removed.push((topic.to_string(), *partition));
                }
            }
            return Ok(removed);
        }
        for item in states.try_iter()? {
            let item = item?;
            let topic: Arc<str> = item.getattr("topic")?.extract::<String>()?.into();
            let partition: i32 = item.getattr("partition")?.extract()?;
            let list = |name: &str| -> PyResult<Replicas> {
                Ok(item.getattr(name)?.extract::<Vec<i32>>()?.into())
            };
            let state = CachedState {
                controller_epoch: item.getattr("controller_epoch")?.extract()?,
                leader: item.getattr("leader")?.extract()?,
                leader_epoch: item.getattr("leader_epoch")?.extract()?,
                isr: list("isr")?,
                partition_epoch: item.getattr("partition_epoch")?.extract()?,
                replicas: list("replicas")?,
                offline_replicas: list("offline_replicas")?,
            };
            let digest = state.digest(&topic, partition);
            if self.cache.apply(&topic, partition, state, digest) {
                removed.push((topic.to_string(), partition));
            }
        }
        Ok(removed)
    }

    fn get(&self, topic: &str, partition: i32) -> Option<StateTuple> {
        self.cache.get(topic, partition).map(state_tuple)
    }

    fn has_topic(&self, topic: &str) -> bool {
        self.cache.has_topic(topic)
    }

    /// Every cached partition as `(topic, partition, state tuple)`, sorted by key.
    fn items(&self) -> Vec<(String, i32, StateTuple)> {
        let mut items: Vec<_> = self
            .cache
            .iter()
            .map(|(t, p, s)| (t.to_owned(), p, state_tuple(s)))
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
