//! `kctl._engine.StateTable`: the native partition-state znodes of `kctl.stores.memory`.

use std::sync::{Mutex, MutexGuard};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString, PyTuple, PyType};

use crate::model::{Brokers, LeaderAndIsr, LeaderRecoveryState};
use crate::py::convert::{state_from_tuple, state_to_tuple, StateTuple};
use crate::statetable::{Slot, StateTable as Table, WriteError};

/// `(state or None when corrupt, version, czxid, mzxid)`.
type SlotTuple = (Option<StateTuple>, i32, i64, i64);

fn slot_tuple(slot: &Slot) -> SlotTuple {
    (
        slot.state.as_ref().map(state_to_tuple),
        slot.version,
        slot.czxid,
        slot.mzxid,
    )
}

/// Write errors for Python: 1 no node, 2 node exists, 3 bad version (0 is success).
fn code(error: WriteError) -> u8 {
    match error {
        WriteError::NoNode => 1,
        WriteError::NodeExists => 2,
        WriteError::BadVersion(_) => 3,
    }
}

/// An exact Python `int` within Kafka's `Int`: what the tree keeps in a state row (`_row_of`).
fn int32(value: &Bound<'_, PyAny>) -> Option<i32> {
    if value.is_exact_instance_of::<PyInt>() {
        value.extract().ok()
    } else {
        None
    }
}

/// One `(TopicPartition, LeaderAndIsr)` item of an update as the table takes it, with the
/// objects its answer is made of.
struct Update<'py> {
    key: Bound<'py, PyAny>,
    topic: Bound<'py, PyString>,
    partition: i32,
    state: LeaderAndIsr,
    /// `leader`, `isr`, `leader_epoch` and `leader_recovery_state`, for the written state.
    fields: [Bound<'py, PyAny>; 4],
}

/// The item `key: value` as an [`Update`]; None when the key is not a `(str, int)` partition or
/// the state is not one the tree keeps as a row (`memtree._row_of`, with a version that has a
/// next).
fn update_of<'py>(
    key: Bound<'py, PyAny>,
    value: &Bound<'py, PyAny>,
    leader_and_isr: &Bound<'py, PyType>,
    recovery_state: &Bound<'py, PyType>,
) -> Option<Update<'py>> {
    let py = key.py();
    let tp = key.cast::<PyTuple>().ok()?;
    if tp.len() != 2 || !value.is_instance(leader_and_isr).ok()? {
        return None;
    }
    let topic = tp.get_item(0).ok()?.cast_into::<PyString>().ok()?;
    let partition = int32(&tp.get_item(1).ok()?)?;
    let recovery = value.getattr(intern!(py, "leader_recovery_state")).ok()?;
    if !recovery.is_instance(recovery_state).ok()? {
        return None;
    }
    let isr = value.getattr(intern!(py, "isr")).ok()?;
    let brokers = isr.cast::<PyTuple>().ok()?;
    let brokers = brokers
        .iter()
        .map(|b| int32(&b))
        .collect::<Option<Brokers>>()?;
    let partition_epoch = int32(&value.getattr(intern!(py, "partition_epoch")).ok()?)?;
    (partition_epoch < i32::MAX).then_some(())?;
    let leader = value.getattr(intern!(py, "leader")).ok()?;
    let leader_epoch = value.getattr(intern!(py, "leader_epoch")).ok()?;
    let state = LeaderAndIsr {
        leader: int32(&leader)?,
        isr: brokers,
        leader_epoch: int32(&leader_epoch)?,
        partition_epoch,
        recovery: LeaderRecoveryState::from_code(recovery.extract().ok()?),
    };
    Some(Update {
        key,
        topic,
        partition,
        state,
        fields: [leader, isr, leader_epoch, recovery],
    })
}

/// What `StateTable.update_states` answers: the written states by partition, the partitions
/// whose version was not the expected one, and those without a state znode, each in order.
type Updated<'py> = (
    Bound<'py, PyDict>,
    Vec<Bound<'py, PyAny>>,
    Vec<Bound<'py, PyAny>>,
);

/// Frozen, with the table behind a mutex, so the engine can work on it without the GIL (always
/// under the memory tree's lock, so the mutex is never contended).
#[pyclass(module = "kctl._engine", frozen)]
pub struct StateTable {
    pub table: Mutex<Table>,
}

impl StateTable {
    pub fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the lock would have aborted the call; the data is still whole.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl StateTable {
    #[new]
    fn new(record_history: bool) -> Self {
        Self {
            table: Mutex::new(Table::new(record_history)),
        }
    }

    fn next_seq(&self) -> u64 {
        self.lock().next_seq()
    }

    fn get(&self, topic: &str, partition: i32) -> Option<SlotTuple> {
        self.lock().get(topic, partition).map(slot_tuple)
    }

    /// `(code, history sequence number)`: see [`code`] and `Table::create`.
    fn create(
        &self,
        topic: &str,
        partition: i32,
        state: Option<StateTuple>,
        zxid: i64,
    ) -> (u8, u64) {
        match self
            .lock()
            .create(topic, partition, state.map(state_from_tuple), zxid)
        {
            Ok(seq) => (0, seq),
            Err(e) => (code(e), 0),
        }
    }

    /// `(code, new version, history sequence number)`: see [`code`] and `Table::set`.
    fn set(
        &self,
        topic: &str,
        partition: i32,
        state: Option<StateTuple>,
        expected: i32,
        zxid: i64,
    ) -> (u8, i32, u64) {
        match self.lock().set(
            topic,
            partition,
            state.map(state_from_tuple),
            expected,
            zxid,
        ) {
            Ok((version, seq)) => (0, version, seq),
            Err(e) => (code(e), -1, 0),
        }
    }

    /// `MemoryStore.update_partition_states` in one call (under the tree's lock): each
    /// `TopicPartition: LeaderAndIsr` of `updates`, in order, written at the version in its
    /// `partition_epoch` and stamped with `controller_epoch`, as `Transaction.set_state` writes
    /// it, with the commit's `zxid`; answered as [`Updated`], each written state a new
    /// `leader_and_isr` at the znode's new version. None, with nothing written, when an update is
    /// not a partition state the tree keeps as a row (not a `leader_and_isr` with a
    /// `recovery_state` and `Int` fields): the tree's general path then writes them all, as it
    /// writes anything.
    fn update_states<'py>(
        &self,
        updates: &Bound<'py, PyDict>,
        controller_epoch: &Bound<'py, PyAny>,
        zxid: i64,
        leader_and_isr: &Bound<'py, PyType>,
        recovery_state: &Bound<'py, PyType>,
    ) -> PyResult<Option<Updated<'py>>> {
        let Some(controller_epoch) = int32(controller_epoch) else {
            return Ok(None);
        };
        // Taken out before any attribute is read, which could run code that changes the dict.
        let items: Vec<_> = updates.iter().collect();
        let Some(parsed) = items
            .into_iter()
            .map(|(key, value)| update_of(key, &value, leader_and_isr, recovery_state))
            .collect::<Option<Vec<_>>>()
        else {
            return Ok(None);
        };
        let Some(topics) = parsed
            .iter()
            .map(|u| u.topic.to_str().ok())
            .collect::<Option<Vec<&str>>>()
        else {
            return Ok(None);
        };
        let mut outcomes = Vec::with_capacity(parsed.len());
        {
            let mut table = self.lock();
            let mut at = 0;
            for run in topics.chunk_by(|a, b| a == b) {
                let updates = &parsed[at..at + run.len()];
                at += run.len();
                outcomes.extend(table.update_states(
                    run[0],
                    updates.iter().map(|u| (u.partition, &u.state)),
                    controller_epoch,
                    zxid,
                ));
            }
        }
        // Made after the table is released: a state's class is Python code.
        let py = updates.py();
        let (written, mut to_retry, mut missing) = (PyDict::new(py), Vec::new(), Vec::new());
        for (update, outcome) in parsed.into_iter().zip(outcomes) {
            match outcome {
                Ok(stored) => {
                    let [leader, isr, leader_epoch, recovery] = update.fields;
                    let state = leader_and_isr.call1((
                        leader,
                        isr,
                        leader_epoch,
                        stored.partition_epoch,
                        recovery,
                    ))?;
                    written.set_item(update.key, state)?;
                }
                Err(WriteError::BadVersion(_)) => to_retry.push(update.key),
                Err(WriteError::NoNode | WriteError::NodeExists) => missing.push(update.key),
            }
        }
        Ok(Some((written, to_retry, missing)))
    }

    /// `(deleted slot, history sequence number)`, None when absent.
    fn delete(&self, topic: &str, partition: i32) -> Option<(SlotTuple, u64)> {
        self.lock()
            .delete(topic, partition)
            .ok()
            .map(|(slot, seq)| (slot_tuple(&slot), seq))
    }

    fn restore(&self, topic: &str, partition: i32, slot: Option<SlotTuple>, seq: u64) {
        let slot = slot.map(|(state, version, czxid, mzxid)| Slot {
            state: state.map(state_from_tuple),
            version,
            czxid,
            mzxid,
        });
        self.lock().restore(topic, partition, slot, seq);
    }

    fn forget_history(&self, topic: &str) {
        self.lock().forget_history(topic);
    }

    /// `[(seq, state or None when deleted)]`, oldest first; None without history recording.
    fn history(&self, topic: &str, partition: i32) -> Option<Vec<(u64, Option<StateTuple>)>> {
        self.lock().history(topic, partition).map(|rows| {
            rows.into_iter()
                .map(|r| (r.seq, r.state.as_ref().map(state_to_tuple)))
                .collect()
        })
    }

    /// `[(topic, partition)]` of the state znodes created or changed after `zxid`.
    fn modified_since(&self, zxid: i64) -> Vec<(String, i32)> {
        self.lock()
            .modified_since(zxid)
            .into_iter()
            .map(|(t, p)| (t.to_owned(), p))
            .collect()
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }
}
