//! `kctl._engine.StateTable`: the native partition-state znodes of `kctl.stores.memory`.

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;

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
