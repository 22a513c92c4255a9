//! The engine's view of a Python `StateStore`: one Python call per bulk operation, converting keys
//! and states at the boundary (per-partition Python objects are unavoidable with a Python store),
//! and the in-memory store's native fast path (`kctl.stores.base.NativeStateTable`), which has none.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::context::{Context, Part, TopicIdx};
use crate::hash::{HashMap, HashSet};
use crate::model::{LeaderAndIsr, LeaderIsrAndControllerEpoch};
use crate::py::classes::classes;
use crate::py::convert::{
    attached, failure_from_exception, leader_and_isr_from_py, leader_and_isr_to_py,
    partition_state_from_py, partition_state_to_py, topic_partition,
};
use crate::py::statetable::StateTable as PyStateTable;
use crate::statetable::{Slots, WriteError};
use crate::store::{partition_state_path, Failure, FailureKind, Read, Store, Updated};

/// A Python store, reached with the GIL taken per bulk call (the engine runs without it).
pub struct PyStore {
    pub store: Py<PyAny>,
}

/// The `TopicPartition` of each partition, for Python.
pub fn keys<'py>(
    py: Python<'py>,
    ctx: &Context,
    parts: &[Part],
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    parts
        .iter()
        .map(|p| {
            topic_partition(
                py,
                ctx.topic_name(ctx.partition_topic(*p)),
                ctx.partition_id(*p),
            )
        })
        .collect()
}

fn part_of(ctx: &Context, key: &Bound<'_, PyAny>) -> PyResult<Part> {
    let (topic, partition): (String, i32) = key.extract()?;
    ctx.part(&topic, partition)
        .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("{topic}-{partition}")))
}

/// Whether the class of `store` offers a native fast path, declared by having `marker` (the first
/// method of the fast path's protocol in `kctl.stores.base`) and answered by the partition-state
/// methods of the class that defines it: a subclass or wrapper that changes those methods (as
/// tests' fault injectors do) goes through Python.
pub fn offers_fast_path(store: &Bound<'_, PyAny>, marker: &str) -> bool {
    let check = || -> PyResult<bool> {
        let py = store.py();
        let cls = store.get_type();
        let marker = PyString::new(py, marker);
        for base in cls.mro() {
            let declared = base.getattr(pyo3::intern!(py, "__dict__"))?;
            if !declared.contains(&marker)? {
                continue;
            }
            for method in ["get_partition_states", "update_partition_states"] {
                if !cls.getattr(method)?.is(&base.getattr(method)?) {
                    return Ok(false);
                }
            }
            // Creates: a store that has them (the ZooKeeper store's are native too).
            let create = "create_partition_states";
            if let (Ok(own), Ok(declared)) = (cls.getattr(create), base.getattr(create)) {
                if !own.is(&declared) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        Ok(false)
    };
    check().unwrap_or(false)
}

/// Before creating partition states, as `KafkaZkClient.create_partition_states`: per topic of
/// `states`, the names of its `/partitions` children, that znode created (fenced) where missing
/// (`native_partition_parents`); or the failure of a topic that does not exist.
pub fn partition_parents(
    store: &Py<PyAny>,
    ctx: &Context,
    states: &[(Part, LeaderIsrAndControllerEpoch)],
    fence: i32,
) -> Result<HashMap<TopicIdx, Result<HashSet<String>, Failure>>, Failure> {
    let mut seen = HashSet::default();
    let topics: Vec<TopicIdx> = states
        .iter()
        .map(|(p, _)| ctx.partition_topic(*p))
        .filter(|t| seen.insert(*t))
        .collect();
    let names: Vec<&str> = topics.iter().map(|t| ctx.topic_name(*t)).collect();
    attached(|py| {
        let found: Vec<Bound<'_, PyAny>> = store
            .bind(py)
            .call_method1("native_partition_parents", (names, fence))?
            .extract()?;
        if found.len() != topics.len() {
            return Err(PyValueError::new_err(format!(
                "native_partition_parents answered {} of {} topics",
                found.len(),
                topics.len()
            )));
        }
        topics
            .iter()
            .zip(found)
            .map(|(t, children)| -> PyResult<_> {
                let listed: Result<HashSet<String>, Failure> =
                    if children.is_instance_of::<PyList>() {
                        Ok(children.extract::<Vec<String>>()?.into_iter().collect())
                    } else {
                        Err(failure_from_exception(py, &children))
                    };
                Ok((*t, listed))
            })
            .collect()
    })
}

impl PyStore {
    /// Read again, through Python, the `(position, partition)`s a native fast path found
    /// something other than a partition state for: the Python store's decoders name what they
    /// find, so errors read the same on every path.
    pub fn reread(
        &mut self,
        ctx: &Context,
        unusual: &[(usize, Part)],
        reads: &mut [Read],
    ) -> Result<(), Failure> {
        if unusual.is_empty() {
            return Ok(());
        }
        let parts: Vec<Part> = unusual.iter().map(|(_, p)| *p).collect();
        for ((at, _), read) in unusual.iter().zip(self.read_states(ctx, &parts)?) {
            reads[*at] = read;
        }
        Ok(())
    }
}

impl Store for PyStore {
    fn read_states(&mut self, ctx: &Context, parts: &[Part]) -> Result<Vec<Read>, Failure> {
        attached(|py| {
            let keys = keys(py, ctx, parts)?;
            let result = self
                .store
                .bind(py)
                .call_method1("get_partition_states", (PyList::new(py, &keys)?,))?;
            let values: Bound<'_, PyDict> = result.getattr("values")?.cast_into()?;
            let errors: Bound<'_, PyDict> = result.getattr("errors")?.cast_into()?;
            let mut reads = Vec::with_capacity(parts.len());
            for key in &keys {
                if let Some(value) = values.get_item(key)? {
                    reads.push(Read::Found(partition_state_from_py(&value)?));
                    continue;
                }
                reads.push(match errors.get_item(key)? {
                    Some(error) => {
                        let failure = failure_from_exception(py, &error);
                        if failure.kind == FailureKind::NoNode {
                            Read::Missing
                        } else {
                            Read::Failed(failure)
                        }
                    }
                    None => Read::Missing,
                });
            }
            Ok(reads)
        })
    }

    fn create_states(
        &mut self,
        ctx: &Context,
        states: &[(Part, LeaderIsrAndControllerEpoch)],
        fence: i32,
    ) -> Result<Vec<Option<Failure>>, Failure> {
        attached(|py| {
            let parts: Vec<Part> = states.iter().map(|(p, _)| *p).collect();
            let keys = keys(py, ctx, &parts)?;
            let mapping = PyDict::new(py);
            for (key, (_, state)) in keys.iter().zip(states) {
                mapping.set_item(key, partition_state_to_py(py, state)?)?;
            }
            let responses = self
                .store
                .bind(py)
                .call_method1("create_partition_states", (mapping, fence))?;
            keys.iter()
                .map(|key| {
                    let error = responses.call_method1("get", (key,))?;
                    Ok((!error.is_none()).then(|| failure_from_exception(py, &error)))
                })
                .collect()
        })
    }

    fn update_states(
        &mut self,
        ctx: &Context,
        updates: &[(Part, LeaderAndIsr)],
        controller_epoch: i32,
        fence: i32,
    ) -> Result<Updated, Failure> {
        attached(|py| {
            let parts: Vec<Part> = updates.iter().map(|(p, _)| *p).collect();
            let keys = keys(py, ctx, &parts)?;
            let mapping = PyDict::new(py);
            for (key, (_, lai)) in keys.iter().zip(updates) {
                mapping.set_item(key, leader_and_isr_to_py(py, lai)?)?;
            }
            let outcome = self.store.bind(py).call_method1(
                "update_partition_states",
                (mapping, controller_epoch, fence),
            )?;
            let mut updated = Updated::default();
            let successful: Bound<'_, PyDict> = outcome.getattr("successful")?.cast_into()?;
            for (key, value) in successful.iter() {
                updated
                    .successful
                    .push((part_of(ctx, &key)?, leader_and_isr_from_py(&value)?));
            }
            for key in outcome.getattr("to_retry")?.try_iter()? {
                updated.to_retry.push(part_of(ctx, &key?)?);
            }
            let failed: Bound<'_, PyDict> = outcome.getattr("failed")?.cast_into()?;
            for (key, value) in failed.iter() {
                updated
                    .failed
                    .push((part_of(ctx, &key)?, failure_from_exception(py, &value)));
            }
            Ok(updated)
        })
    }

    fn unclean_overrides(
        &mut self,
        ctx: &Context,
        topics: &[TopicIdx],
    ) -> Result<Vec<Result<Option<String>, Failure>>, Failure> {
        attached(|py| {
            let names: Vec<&str> = topics.iter().map(|t| ctx.topic_name(*t)).collect();
            let read = self
                .store
                .bind(py)
                .call_method1("get_topic_configs", (names.clone(),))?;
            let values: Bound<'_, PyDict> = read.getattr("values")?.cast_into()?;
            let errors: Bound<'_, PyDict> = read.getattr("errors")?.cast_into()?;
            let mut out = Vec::with_capacity(names.len());
            for name in &names {
                if let Some(error) = errors.get_item(name)? {
                    out.push(Err(failure_from_exception(py, &error)));
                    continue;
                }
                let value = match values.get_item(name)? {
                    Some(config) => {
                        config.call_method1("get", ("unclean.leader.election.enable",))?
                    }
                    None => py.None().into_bound(py),
                };
                out.push(Ok(if value.is_none() {
                    None
                } else {
                    Some(value.str()?.to_string())
                }));
            }
            Ok(out)
        })
    }
}

/// The in-memory store's fast path (`kctl.stores.base.NativeStateTable`): partition states are read
/// and written directly in its native table (`native_begin` / `native_end` lock the tree around
/// each bulk operation),
/// with no Python object per partition; everything else, and corrupt data, goes through Python.
pub struct NativeMemory {
    pub inner: PyStore,
}

/// What `native_begin` hands over: the table, `/controller_epoch`'s version, the zxid to write
/// with, and whether partition states are watched.
type Begun = (Py<PyStateTable>, i32, i64, bool);

impl NativeMemory {
    /// Whether `store` offers the in-memory fast path (`kctl.stores.base.NativeStateTable`).
    pub fn supports(store: &Bound<'_, PyAny>) -> bool {
        offers_fast_path(store, "native_begin")
    }

    fn begin(&self) -> Result<Begun, Failure> {
        let begun = attached(|py| {
            Ok(self
                .inner
                .store
                .bind(py)
                .call_method0("native_begin")?
                .unbind())
        })?;
        // Begun: the tree is locked until `native_end`, even when the answer is not understood.
        attached(|py| begun.bind(py).extract::<Begun>())
            .map_err(|failure| self.end(false, Vec::new()).err().unwrap_or(failure))
    }

    fn end(&self, wrote: bool, written: Vec<(String, i32)>) -> Result<(), Failure> {
        attached(|py| {
            self.inner
                .store
                .bind(py)
                .call_method1("native_end", (wrote, written))
                .map(drop)
        })
    }

    /// A topic's creation as `TreeClient.create_partition_states` makes it, in one transaction,
    /// with no Python object per partition: each topic's `/partitions` listed (created where
    /// missing), the missing partition znodes made plain by the tree
    /// (`native_create_partition_znodes`) and the states created in the table. False, with
    /// nothing written after the listing, when anything is unusual (a topic that does not exist,
    /// a fence that fails, a state or znode that is there already or would not be plain): the
    /// Python path then does it all and names the errors.
    fn create_in_table(
        &self,
        ctx: &Context,
        states: &[(Part, LeaderIsrAndControllerEpoch)],
        fence: i32,
    ) -> Result<bool, Failure> {
        // Nothing to create commits nothing; a store without the method creates through Python.
        let creates = attached(|py| {
            self.inner
                .store
                .bind(py)
                .hasattr("native_create_partition_znodes")
        })?;
        if states.is_empty() || !creates {
            return Ok(false);
        }
        let parents = partition_parents(&self.inner.store, ctx, states, fence)?;
        // Per topic, in the order of the states: (name, partition znodes to create, partition
        // znodes there already).
        let mut plan: Vec<(&str, Vec<i32>, Vec<i32>)> = Vec::new();
        let mut at: HashMap<TopicIdx, usize> = HashMap::default();
        let mut seen = HashSet::default();
        for (p, _) in states {
            let t = ctx.partition_topic(*p);
            let Ok(existing) = &parents[&t] else {
                return Ok(false);
            };
            if !seen.insert(*p) {
                return Ok(false);
            }
            let entry = *at.entry(t).or_insert_with(|| {
                plan.push((ctx.topic_name(t), Vec::new(), Vec::new()));
                plan.len() - 1
            });
            let partition = ctx.partition_id(*p);
            if existing.contains(&partition.to_string()) {
                plan[entry].2.push(partition);
            } else {
                plan[entry].1.push(partition);
            }
        }
        let (table, version, zxid, _) = self.begin()?;
        let created = (fence == -1 || version == fence)
            && {
                let table = table.get().lock();
                states.iter().all(|(p, _)| {
                    let topic = ctx.topic_name(ctx.partition_topic(*p));
                    table.get(topic, ctx.partition_id(*p)).is_none()
                })
            }
            && match attached(|py| {
                self.inner
                    .store
                    .bind(py)
                    .call_method1("native_create_partition_znodes", (plan,))?
                    .extract::<bool>()
            }) {
                Ok(created) => created,
                Err(failure) => {
                    self.end(false, Vec::new())?;
                    return Err(failure);
                }
            };
        if created {
            let mut table = table.get().lock();
            for (p, state) in states {
                let topic = ctx.topic_name(ctx.partition_topic(*p));
                // Every state was checked absent under the tree's lock, and each partition is
                // created once.
                let _ = table.create(topic, ctx.partition_id(*p), Some(state.clone()), zxid);
            }
        }
        self.end(created, Vec::new())?;
        Ok(created)
    }

    fn no_node(&self, ctx: &Context, p: Part) -> Failure {
        let path =
            partition_state_path(ctx.topic_name(ctx.partition_topic(p)), ctx.partition_id(p));
        let message = format!("{path} does not exist");
        attached(|py| {
            let error = classes(py)?
                .errors
                .no_node_error
                .bind(py)
                .call1((message.as_str(), path.as_str()))?;
            Ok(failure_from_exception(py, &error))
        })
        .unwrap_or_else(|failure| failure)
    }
}

impl Store for NativeMemory {
    fn read_states(&mut self, ctx: &Context, parts: &[Part]) -> Result<Vec<Read>, Failure> {
        let (table, ..) = self.begin()?;
        let mut reads = Vec::with_capacity(parts.len());
        let mut corrupt = Vec::new();
        {
            let table = table.get().lock();
            let mut slots: Option<(TopicIdx, Option<&Slots>)> = None;
            for &p in parts {
                let t = ctx.partition_topic(p);
                let topic_slots = match slots {
                    Some((cached, found)) if cached == t => found,
                    _ => {
                        let found = table.topic_slots(ctx.topic_name(t));
                        slots = Some((t, found));
                        found
                    }
                };
                reads.push(
                    match topic_slots.and_then(|s| s.get(&ctx.partition_id(p))) {
                        None => Read::Missing,
                        Some(slot) => match &slot.state {
                            Some(state) => {
                                let mut state = state.clone();
                                state.leader_and_isr.partition_epoch = slot.version;
                                Read::Found(state)
                            }
                            None => {
                                corrupt.push((reads.len(), p));
                                Read::Missing
                            }
                        },
                    },
                );
            }
        }
        self.end(false, Vec::new())?;
        self.inner.reread(ctx, &corrupt, &mut reads)?;
        Ok(reads)
    }

    fn create_states(
        &mut self,
        ctx: &Context,
        states: &[(Part, LeaderIsrAndControllerEpoch)],
        fence: i32,
    ) -> Result<Vec<Option<Failure>>, Failure> {
        if self.create_in_table(ctx, states, fence)? {
            return Ok(vec![None; states.len()]);
        }
        self.inner.create_states(ctx, states, fence)
    }

    fn update_states(
        &mut self,
        ctx: &Context,
        updates: &[(Part, LeaderAndIsr)],
        controller_epoch: i32,
        fence: i32,
    ) -> Result<Updated, Failure> {
        let (table, version, zxid, watched) = self.begin()?;
        if fence != -1 && version != fence {
            self.end(false, Vec::new())?;
            return Err(Failure::new(
                FailureKind::ControllerMoved,
                format!("Controller epoch zkVersion check fails. Expected zkVersion = {fence}"),
            ));
        }
        let mut updated = Updated::default();
        let mut missing = Vec::new();
        let mut written = Vec::new();
        {
            let mut table = table.get().lock();
            let topic_of = |(p, _): &(Part, LeaderAndIsr)| ctx.partition_topic(*p);
            for run in updates.chunk_by(|a, b| topic_of(a) == topic_of(b)) {
                let topic = ctx.topic_name(topic_of(&run[0]));
                let results = table.update_states(
                    topic,
                    run.iter().map(|(p, lai)| (ctx.partition_id(*p), lai)),
                    controller_epoch,
                    zxid,
                );
                for ((p, _), result) in run.iter().zip(results) {
                    match result {
                        Ok(stored) => {
                            if watched {
                                written.push((topic.to_owned(), ctx.partition_id(*p)));
                            }
                            updated.successful.push((*p, stored));
                        }
                        Err(WriteError::BadVersion(_)) => updated.to_retry.push(*p),
                        Err(WriteError::NoNode | WriteError::NodeExists) => missing.push(*p),
                    }
                }
            }
        }
        self.end(!updated.successful.is_empty(), written)?;
        updated.failed = missing
            .into_iter()
            .map(|p| (p, self.no_node(ctx, p)))
            .collect();
        Ok(updated)
    }

    fn unclean_overrides(
        &mut self,
        ctx: &Context,
        topics: &[TopicIdx],
    ) -> Result<Vec<Result<Option<String>, Failure>>, Failure> {
        self.inner.unclean_overrides(ctx, topics)
    }
}
