//! The ZooKeeper store's native partition-state path (`kctl.stores.base.NativeZooKeeperCodec`):
//! request bodies built and responses decoded here (`crate::zkwire`, `crate::zkjson`), with the
//! Python store only moving bytes over its kazoo connection (`native_exchange`, pipelined, sent
//! again after a reconnect).
//!
//! - [`NativeZooKeeper`]: the engine's store for a plain `ZooKeeperStore`, with no Python object
//!   per partition (the store's other operations, and documents that are not the usual ones, go
//!   through Python);
//! - `zk_write_partition_states` / `zk_read_partition_states` / `zk_create_partition_states`: the
//!   same loops for the store's own `update_partition_states` / `get_partition_states` /
//!   `create_partition_states`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::context::{Context, Part, TopicIdx};
use crate::model::{LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState};
use crate::py::convert::{attached, failure_from_exception, or_failure};
use crate::py::store::{offers_fast_path, partition_parents, PyStore};
use crate::store::{partition_state_path, Failure, Read, Store, Updated};
use crate::zkjson;
use crate::zkwire::{
    self, BulkError, CreateFailure, CreateItem, DataRead, Limits, Request, SetItem, SetOutcome,
};

const CONTROLLER_EPOCH: &str = "/controller_epoch";

/// What `ZooKeeperStore.native_zk()` tells: the chroot, the limits, whether the servers have
/// multiRead, and the ACL every znode the store creates gets (jute-encoded; None when an ACL
/// policy decides it per path, and creates go through Python).
#[derive(Clone)]
pub struct ZkParams {
    chroot: String,
    limits: Limits,
    multi_read: bool,
    create_acl: Option<Vec<u8>>,
}

impl ZkParams {
    fn of(store: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (chroot, max_ops, max_reads, max_bytes, multi_read, create_acl): (
            String,
            usize,
            usize,
            usize,
            bool,
            Option<Bound<'_, PyBytes>>,
        ) = store.call_method0("native_zk")?.extract()?;
        Ok(Self {
            chroot,
            limits: Limits {
                max_ops,
                max_bytes,
                max_reads,
            },
            multi_read,
            create_acl: create_acl.map(|acl| acl.as_bytes().to_vec()),
        })
    }
}

/// Send the requests through the store, pipelined; the response bodies in order.
fn exchange(store: &Py<PyAny>, kind: i32, requests: Vec<Request>) -> Result<Vec<Vec<u8>>, PyErr> {
    Python::attach(|py| {
        let items = requests
            .iter()
            .map(|r| (PyBytes::new(py, &r.body), r.path.as_str()))
            .collect::<Vec<_>>();
        let answers = store
            .bind(py)
            .call_method1("native_exchange", (kind, items))?;
        answers
            .try_iter()?
            .map(|answer| Ok(answer?.cast_into::<PyBytes>()?.as_bytes().to_vec()))
            .collect()
    })
}

/// The store's error for a failed bulk operation, as a Python exception.
fn bulk_error(
    store: &Py<PyAny>,
    error: BulkError<PyErr>,
    paths: &dyn Fn(usize) -> String,
    fence: i32,
) -> PyErr {
    Python::attach(|py| {
        let store = store.bind(py);
        let made = match error {
            BulkError::Exchange(e) => return e,
            BulkError::Fenced(code) => store.call_method1("native_fence_error", (code, fence)),
            BulkError::TooLarge(i, size) => {
                store.call_method1("native_limit_error", (paths(i), size))
            }
            BulkError::Wire(e) => store.call_method1("native_wire_error", (e.to_string(),)),
        };
        match made {
            Ok(value) => PyErr::from_value(value),
            Err(e) => e,
        }
    })
}

/// The store's error for ZooKeeper's error `code` on `path`, as a failure.
fn item_failure(store: &Py<PyAny>, path: &str, code: i32) -> Result<Failure, Failure> {
    attached(|py| {
        let error = store.bind(py).call_method1("native_error", (path, code))?;
        Ok(failure_from_exception(py, &error))
    })
}

/// The engine's store for a plain `ZooKeeperStore`.
pub struct NativeZooKeeper {
    pub inner: PyStore,
    pub params: ZkParams,
}

impl NativeZooKeeper {
    /// The store's parameters when `store` offers the ZooKeeper codec's fast path
    /// (`kctl.stores.base.NativeZooKeeperCodec`).
    pub fn supports(store: &Bound<'_, PyAny>) -> Option<ZkParams> {
        if !offers_fast_path(store, "native_exchange") {
            return None;
        }
        ZkParams::of(store).ok()
    }
}

/// Read the states at `paths` (without the chroot): per path, the natively decoded state, the
/// raw document for Python's decoder, or ZooKeeper's error code.
enum StateRead {
    Decoded(zkjson::DecodedState, i32),
    Raw(Option<Vec<u8>>, i32),
    Failed(i32),
}

fn read_states(
    store: &Py<PyAny>,
    params: &ZkParams,
    paths: &[String],
) -> Result<Vec<StateRead>, PyErr> {
    let full: Vec<String> = paths
        .iter()
        .map(|p| format!("{}{p}", params.chroot))
        .collect();
    let reads = zkwire::read_all(&full, params.limits, &mut |kind, requests| {
        exchange(store, kind, requests)
    })
    .map_err(|e| bulk_error(store, e, &|i| paths[i].clone(), -1))?;
    Ok(reads
        .into_iter()
        .map(|read| match read {
            DataRead::Found(Some(data), version) => match zkjson::decode_partition_state(&data) {
                Some(state) => StateRead::Decoded(state, version),
                None => StateRead::Raw(Some(data), version),
            },
            DataRead::Found(None, version) => StateRead::Raw(None, version),
            DataRead::Failed(code) => StateRead::Failed(code),
        })
        .collect())
}

/// Conditionally write each `(path without chroot, data, version)`, fenced unless `fence` is -1.
fn write_states(
    store: &Py<PyAny>,
    params: &ZkParams,
    items: Vec<SetItem>,
    fence: i32,
) -> Result<Vec<SetOutcome>, PyErr> {
    let chroot = params.chroot.as_str();
    let epoch_path = format!("{chroot}{CONTROLLER_EPOCH}");
    let fenced = (fence != -1).then_some((epoch_path.as_str(), fence));
    zkwire::conditional_sets(&items, fenced, params.limits, &mut |kind, requests| {
        exchange(store, kind, requests)
    })
    .map_err(|e| {
        bulk_error(
            store,
            e,
            &|i| items[i].path[chroot.len()..].to_owned(),
            fence,
        )
    })
}

fn set_items(
    params: &ZkParams,
    states: impl Iterator<Item = (String, Vec<u8>, i32)>,
) -> Vec<SetItem> {
    states
        .map(|(path, data, version)| SetItem {
            path: format!("{}{path}", params.chroot),
            data,
            version,
        })
        .collect()
}

/// A partition state to create: topic, partition, whether its `/partitions/<p>` is to be created
/// too, and the state's JSON.
type StateToCreate<'a> = (&'a str, i32, bool, Vec<u8>);

/// Create each state (and the parents asked for) with `acl`, fenced unless `fence` is -1; per
/// state None, or the path (without the chroot) of the create that failed and ZooKeeper's code.
fn create_states(
    store: &Py<PyAny>,
    params: &ZkParams,
    acl: &[u8],
    states: Vec<StateToCreate<'_>>,
    fence: i32,
) -> Result<Vec<Option<(String, i32)>>, PyErr> {
    let chroot = params.chroot.as_str();
    let items: Vec<CreateItem> = states
        .into_iter()
        .map(|(topic, partition, with_parent, data)| {
            let path = format!("{chroot}{}", partition_state_path(topic, partition));
            let parent = with_parent.then(|| path[..path.len() - "/state".len()].to_owned());
            CreateItem { parent, path, data }
        })
        .collect();
    let epoch_path = format!("{chroot}{CONTROLLER_EPOCH}");
    let fenced = (fence != -1).then_some((epoch_path.as_str(), fence));
    let first_path = |i: usize| {
        let item: &CreateItem = &items[i];
        item.parent.as_deref().unwrap_or(&item.path)[chroot.len()..].to_owned()
    };
    let outcomes =
        zkwire::create_states(&items, acl, fenced, params.limits, &mut |kind, requests| {
            exchange(store, kind, requests)
        })
        .map_err(|e| bulk_error(store, e, &first_path, fence))?;
    Ok(items
        .iter()
        .zip(outcomes)
        .map(|(item, outcome)| {
            outcome.map(|CreateFailure { at_parent, code }| {
                let path = if at_parent {
                    item.parent.as_deref().unwrap_or(&item.path)
                } else {
                    &item.path
                };
                (path[chroot.len()..].to_owned(), code)
            })
        })
        .collect())
}

/// The store's error for a create of `path` that failed with `code`, as a failure.
fn create_failure(store: &Py<PyAny>, path: &str, code: i32) -> Result<Failure, Failure> {
    attached(|py| {
        let error = store
            .bind(py)
            .call_method1("native_create_error", (path, code))?;
        Ok(failure_from_exception(py, &error))
    })
}

impl Store for NativeZooKeeper {
    fn read_states(&mut self, ctx: &Context, parts: &[Part]) -> Result<Vec<Read>, Failure> {
        if !self.params.multi_read {
            return self.inner.read_states(ctx, parts);
        }
        let paths: Vec<String> = parts
            .iter()
            .map(|&p| {
                partition_state_path(ctx.topic_name(ctx.partition_topic(p)), ctx.partition_id(p))
            })
            .collect();
        let raw = or_failure(read_states(&self.inner.store, &self.params, &paths))?;
        let mut reads = Vec::with_capacity(parts.len());
        let mut unusual = Vec::new();
        for (at, read) in raw.into_iter().enumerate() {
            reads.push(match read {
                StateRead::Decoded((leader, isr, leader_epoch, controller_epoch), version) => {
                    Read::Found(LeaderIsrAndControllerEpoch {
                        leader_and_isr: LeaderAndIsr {
                            leader,
                            isr: isr.into(),
                            leader_epoch,
                            partition_epoch: version,
                            recovery: LeaderRecoveryState::Recovered,
                        },
                        controller_epoch,
                    })
                }
                StateRead::Failed(zkwire::NO_NODE) => Read::Missing,
                StateRead::Failed(code) => {
                    Read::Failed(item_failure(&self.inner.store, &paths[at], code)?)
                }
                StateRead::Raw(..) => {
                    unusual.push((at, parts[at]));
                    Read::Missing
                }
            });
        }
        self.inner.reread(ctx, &unusual, &mut reads)?;
        Ok(reads)
    }

    /// Kafka's order, as `KafkaZkClient.create_partition_states`: the store makes sure each
    /// topic's `/partitions` exists and lists its children (`native_partition_parents`), then
    /// every state goes in one item with its `/partitions/<p>` where that is missing.
    fn create_states(
        &mut self,
        ctx: &Context,
        states: &[(Part, LeaderIsrAndControllerEpoch)],
        fence: i32,
    ) -> Result<Vec<Option<Failure>>, Failure> {
        let Some(acl) = self.params.create_acl.clone() else {
            return self.inner.create_states(ctx, states, fence);
        };
        let store = &self.inner.store;
        let parents = partition_parents(store, ctx, states, fence)?;
        let mut results: Vec<Option<Failure>> = Vec::with_capacity(states.len());
        let mut to_create = Vec::with_capacity(states.len());
        let mut positions = Vec::with_capacity(states.len());
        for (p, state) in states {
            let t = ctx.partition_topic(*p);
            match &parents[&t] {
                Ok(existing) => {
                    let partition = ctx.partition_id(*p);
                    let with_parent = !existing.contains(&partition.to_string());
                    let lai = &state.leader_and_isr;
                    let data = zkjson::partition_state((
                        lai.leader,
                        &lai.isr,
                        lai.leader_epoch,
                        lai.recovery,
                        state.controller_epoch,
                    ));
                    positions.push(results.len());
                    to_create.push((ctx.topic_name(t), partition, with_parent, data.into_bytes()));
                    results.push(None);
                }
                Err(failure) => results.push(Some(failure.clone())),
            }
        }
        let outcomes = or_failure(create_states(store, &self.params, &acl, to_create, fence))?;
        for (at, outcome) in positions.into_iter().zip(outcomes) {
            if let Some((path, code)) = outcome {
                results[at] = Some(create_failure(store, &path, code)?);
            }
        }
        Ok(results)
    }

    fn update_states(
        &mut self,
        ctx: &Context,
        updates: &[(Part, LeaderAndIsr)],
        controller_epoch: i32,
        fence: i32,
    ) -> Result<Updated, Failure> {
        let items = set_items(
            &self.params,
            updates.iter().map(|(p, lai)| {
                let path = partition_state_path(
                    ctx.topic_name(ctx.partition_topic(*p)),
                    ctx.partition_id(*p),
                );
                let data = zkjson::partition_state((
                    lai.leader,
                    &lai.isr,
                    lai.leader_epoch,
                    lai.recovery,
                    controller_epoch,
                ));
                (path, data.into_bytes(), lai.partition_epoch)
            }),
        );
        let chroot = self.params.chroot.len();
        let paths: Vec<String> = items
            .iter()
            .map(|item| item.path[chroot..].to_owned())
            .collect();
        let outcomes = or_failure(write_states(&self.inner.store, &self.params, items, fence))?;
        let mut updated = Updated::default();
        for (((p, lai), outcome), path) in updates.iter().zip(outcomes).zip(&paths) {
            match outcome {
                SetOutcome::Written(version) => {
                    let mut written = lai.clone();
                    written.partition_epoch = version;
                    updated.successful.push((*p, written));
                }
                SetOutcome::Failed(zkwire::BAD_VERSION) => updated.to_retry.push(*p),
                SetOutcome::Failed(code) => {
                    let failure = item_failure(&self.inner.store, path, code)?;
                    updated.failed.push((*p, failure));
                }
            }
        }
        Ok(updated)
    }

    fn unclean_overrides(
        &mut self,
        ctx: &Context,
        topics: &[TopicIdx],
    ) -> Result<Vec<Result<Option<String>, Failure>>, Failure> {
        self.inner.unclean_overrides(ctx, topics)
    }

    /// A read is a round trip through the server, and the conditional write's version check
    /// makes it unneeded while the cached state is current.
    fn writes_from_cache(&self) -> bool {
        true
    }
}

/// A state to write: topic, partition, leader, ISR, leader epoch, recovering, expected version.
type StateToWrite = (String, i32, i32, Vec<i32>, i32, bool, i32);

/// `ZooKeeperStore.update_partition_states`' bulk write: each state's JSON at its expected
/// version, fenced unless `fence` is -1. Per state, its new version (≥ 0) or ZooKeeper's error
/// code (< 0); raises the store's `ControllerMovedError` when the fence check fails.
#[pyfunction]
pub fn zk_write_partition_states(
    py: Python<'_>,
    store: Bound<'_, PyAny>,
    states: Vec<StateToWrite>,
    controller_epoch: i32,
    fence: i32,
) -> PyResult<Vec<i32>> {
    let params = ZkParams::of(&store)?;
    let store = store.unbind();
    py.detach(|| {
        let items = set_items(
            &params,
            states.into_iter().map(
                |(topic, partition, leader, isr, leader_epoch, recovering, version)| {
                    let recovery = if recovering {
                        LeaderRecoveryState::Recovering
                    } else {
                        LeaderRecoveryState::Recovered
                    };
                    let data = zkjson::partition_state((
                        leader,
                        &isr,
                        leader_epoch,
                        recovery,
                        controller_epoch,
                    ));
                    (
                        partition_state_path(&topic, partition),
                        data.into_bytes(),
                        version,
                    )
                },
            ),
        );
        let outcomes = write_states(&store, &params, items, fence)?;
        Ok(outcomes
            .into_iter()
            .map(|outcome| match outcome {
                SetOutcome::Written(version) => version,
                SetOutcome::Failed(code) => code,
            })
            .collect())
    })
}

/// A state to create: topic, partition, and whether its `/partitions/<p>` is to be created too.
type NewState = (String, i32, bool);

/// `ZooKeeperStore.create_partition_states`' bulk create: each `(topic, partition, with_parent,
/// document)` (the documents encoded by the store, which may write any value), the parents listed
/// by the caller. Per state None, or the path (without the chroot) of the create that failed and
/// ZooKeeper's code; raises the store's `ControllerMovedError` when the fence check fails.
#[pyfunction]
pub fn zk_create_partition_states(
    py: Python<'_>,
    store: Bound<'_, PyAny>,
    states: Vec<(String, i32, bool, Bound<'_, PyBytes>)>,
    fence: i32,
) -> PyResult<Vec<Option<(String, i32)>>> {
    let params = ZkParams::of(&store)?;
    let Some(acl) = params.create_acl.clone() else {
        return Err(PyValueError::new_err(
            "the store's ACL policy decides each znode's ACL",
        ));
    };
    let (keys, documents): (Vec<NewState>, Vec<Vec<u8>>) = states
        .into_iter()
        .map(|(topic, partition, with_parent, document)| {
            (
                (topic, partition, with_parent),
                document.as_bytes().to_vec(),
            )
        })
        .unzip();
    let store = store.unbind();
    py.detach(|| {
        let states = keys
            .iter()
            .zip(documents)
            .map(|((topic, partition, with_parent), document)| {
                (topic.as_str(), *partition, *with_parent, document)
            })
            .collect();
        create_states(&store, &params, &acl, states, fence)
    })
}

/// `ZooKeeperStore.get_partition_states`' bulk read (multiRead): per partition, the decoded
/// `(leader, isr, leader_epoch, controller_epoch, version)` of a usual document, `(data, version)`
/// of any other (for Python's decoder, which names what is wrong), or ZooKeeper's error code.
#[pyfunction]
pub fn zk_read_partition_states<'py>(
    py: Python<'py>,
    store: Bound<'py, PyAny>,
    partitions: Vec<(String, i32)>,
) -> PyResult<Bound<'py, PyList>> {
    let params = ZkParams::of(&store)?;
    if !params.multi_read {
        return Err(PyValueError::new_err(
            "the store's servers have no multiRead",
        ));
    }
    let unbound = store.unbind();
    let paths: Vec<String> = partitions
        .iter()
        .map(|(t, p)| partition_state_path(t, *p))
        .collect();
    let reads = py.detach(|| read_states(&unbound, &params, &paths))?;
    let items = reads
        .into_iter()
        .map(|read| -> PyResult<Bound<'py, PyAny>> {
            Ok(match read {
                StateRead::Decoded((leader, isr, leader_epoch, controller_epoch), version) => (
                    leader,
                    PyTuple::new(py, isr)?,
                    leader_epoch,
                    controller_epoch,
                    version,
                )
                    .into_pyobject(py)?
                    .into_any(),
                StateRead::Raw(data, version) => (data.map(|d| PyBytes::new(py, &d)), version)
                    .into_pyobject(py)?
                    .into_any(),
                StateRead::Failed(code) => code.into_pyobject(py)?.into_any(),
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}
