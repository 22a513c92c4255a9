//! The only module of the crate that imports PyO3: it builds the `kctl._engine` extension module.

mod classes;
mod convert;
mod dataplane;
mod engine;
mod metadata;
mod payload;
mod selector;
mod sets;
mod statetable;
mod store;
mod zookeeper;

use pyo3::intern;
use pyo3::types::{PyBytes, PyDict, PyInt};

use crate::hash::HashMap;
use crate::model::LeaderRecoveryState;

use pyo3::prelude::*;

/// Whether this library was compiled with optimisations (so a slow debug build is easy to spot).
const BUILD_PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

/// Kafka's partition-state JSON for each `(leader, isr, leader_epoch, recovering, controller_epoch)`
/// (the ZooKeeper store's bulk writes), encoded without the GIL.
#[pyfunction]
fn encode_partition_states<'py>(
    py: Python<'py>,
    states: Vec<(i32, Vec<i32>, i32, bool, i32)>,
) -> Vec<Bound<'py, PyBytes>> {
    let encoded: Vec<String> = py.detach(|| {
        states
            .iter()
            .map(
                |(leader, isr, leader_epoch, recovering, controller_epoch)| {
                    let recovery = if *recovering {
                        LeaderRecoveryState::Recovering
                    } else {
                        LeaderRecoveryState::Recovered
                    };
                    crate::zkjson::partition_state((
                        *leader,
                        isr,
                        *leader_epoch,
                        recovery,
                        *controller_epoch,
                    ))
                },
            )
            .collect()
    });
    encoded
        .iter()
        .map(|json| PyBytes::new(py, json.as_bytes()))
        .collect()
}

/// The usual topic document decoded (`crate::zkjson::decode_topic`), the GIL released: `(version,
/// topic_id, partition ids, per partition the index of its replica list, the distinct lists)`;
/// None for any other document, which `TopicZNode.decode` decodes itself.
#[pyfunction]
fn decode_topic_znode(py: Python<'_>, data: &[u8]) -> Option<crate::zkjson::DecodedTopic> {
    py.detach(|| crate::zkjson::decode_topic(data))
}

/// Whether every partition id, leader, leader epoch, partition epoch and ISR member of an
/// AlterPartition's `{tp: LeaderAndIsr}` is a plain `int` within Kafka's `Int`: the check that
/// passes without naming a field (a roll's requests carry hundreds of thousands). False for
/// anything else, which the controller's checks then name.
#[pyfunction]
fn plain_alter_partition(changes: &Bound<'_, PyDict>) -> bool {
    let plain = |value: PyResult<Bound<'_, PyAny>>| {
        value.is_ok_and(|v| v.is_exact_instance_of::<PyInt>() && v.extract::<i32>().is_ok())
    };
    changes.iter().all(|(tp, proposed)| {
        let py = tp.py();
        plain(tp.getattr(intern!(py, "partition")))
            && plain(proposed.getattr(intern!(py, "leader")))
            && plain(proposed.getattr(intern!(py, "leader_epoch")))
            && plain(proposed.getattr(intern!(py, "partition_epoch")))
            && (proposed.getattr(intern!(py, "isr")))
                .and_then(|isr| isr.try_iter())
                .is_ok_and(|mut isr| isr.all(plain))
    })
}

/// For tests only: how many objects the tables that outlive payloads hold, keyed
/// `topic_partitions` and `broker_lists` (the Python objects rows share, see
/// `payload::interned`) and `metadata_lists` (the metadata caches' live list tables).
#[pyfunction]
#[pyo3(name = "_interned_sizes")]
fn interned_sizes() -> HashMap<&'static str, usize> {
    let (topic_partitions, broker_lists) = payload::interned_sizes();
    HashMap::from_iter([
        ("topic_partitions", topic_partitions),
        ("broker_lists", broker_lists),
        ("metadata_lists", crate::metadata::held_lists()),
    ])
}

#[pymodule]
#[pyo3(name = "_engine")]
fn engine_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::alloc::keep_freed_memory();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("build_profile", BUILD_PROFILE)?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<dataplane::DataPlane>()?;
    m.add_class::<sets::Parts>()?;
    m.add_class::<sets::Replicas>()?;
    m.add_class::<sets::Outcomes>()?;
    m.add_class::<sets::StateChangeLines>()?;
    m.add_class::<statetable::StateTable>()?;
    m.add_class::<payload::PartitionStates>()?;
    m.add_class::<payload::HostedPartitions>()?;
    m.add_class::<payload::PartitionErrors>()?;
    m.add_class::<metadata::MetadataCache>()?;
    m.add_function(wrap_pyfunction!(classes::bind, m)?)?;
    m.add_function(wrap_pyfunction!(encode_partition_states, m)?)?;
    m.add_function(wrap_pyfunction!(decode_topic_znode, m)?)?;
    m.add_function(wrap_pyfunction!(plain_alter_partition, m)?)?;
    m.add_function(wrap_pyfunction!(interned_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(metadata::metadata_digest, m)?)?;
    m.add_function(wrap_pyfunction!(metadata::stored_digests, m)?)?;
    m.add_function(wrap_pyfunction!(metadata::fold_digests, m)?)?;
    m.add_function(wrap_pyfunction!(zookeeper::zk_write_partition_states, m)?)?;
    m.add_function(wrap_pyfunction!(zookeeper::zk_read_partition_states, m)?)?;
    m.add_function(wrap_pyfunction!(zookeeper::zk_create_partition_states, m)?)?;
    Ok(())
}
