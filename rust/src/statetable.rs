//! Partition-state znodes (`/brokers/topics/<t>/partitions/<p>/state`) of the in-memory store, kept
//! natively so that the native engine reads and writes them without a Python object per
//! partition. `kctl.stores.memory` keeps every other znode and routes these paths here; versions,
//! zxids and history follow its ZooKeeper semantics.

use crate::hash::HashMap;
use std::sync::Arc;

use crate::model::{LeaderAndIsr, LeaderIsrAndControllerEpoch};

/// A stored state znode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// None when the znode holds something that is not a partition state (tests plant corruption).
    pub state: Option<LeaderIsrAndControllerEpoch>,
    pub version: i32,
    pub czxid: i64,
    pub mzxid: i64,
}

/// One stored version of a partition state, for `partition_history`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    pub seq: u64,
    pub partition: i32,
    /// None: the znode was deleted.
    pub state: Option<LeaderIsrAndControllerEpoch>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum WriteError {
    NoNode,
    NodeExists,
    BadVersion(i32),
}

/// One topic's state znodes, columnar: a slot per partition id in a vector indexed by the id, as
/// Kafka numbers partitions 0 to n-1 (about 72 bytes a partition, where a hash map took three
/// times that); ids far beyond the topic's size (only planted data has them) go to a map.
#[derive(Debug, Default)]
pub struct Slots {
    dense: Vec<Option<Slot>>,
    sparse: HashMap<i32, Slot>,
    len: usize,
}

impl Slots {
    /// The dense index of `partition`, if it is one: ids up to twice the slots held plus 1,024.
    fn index(&self, partition: i32) -> Option<usize> {
        let at = usize::try_from(partition).ok()?;
        (at < self.dense.len().max(2 * self.len + 1024)).then_some(at)
    }

    pub fn get(&self, partition: &i32) -> Option<&Slot> {
        let dense = self
            .index(*partition)
            .and_then(|at| self.dense.get(at)?.as_ref());
        dense.or_else(|| self.sparse.get(partition))
    }

    fn get_mut(&mut self, partition: &i32) -> Option<&mut Slot> {
        if let Some(at) = self.index(*partition) {
            if let Some(Some(slot)) = self.dense.get_mut(at) {
                return Some(slot);
            }
        }
        self.sparse.get_mut(partition)
    }

    pub fn contains_key(&self, partition: &i32) -> bool {
        self.get(partition).is_some()
    }

    /// Put `slot` at `partition`, replacing any slot there.
    fn insert(&mut self, partition: i32, slot: Slot) {
        self.remove(&partition);
        self.len += 1;
        match self.index(partition) {
            Some(at) => {
                if at >= self.dense.len() {
                    self.dense.resize(at + 1, None);
                }
                self.dense[at] = Some(slot);
            }
            None => {
                self.sparse.insert(partition, slot);
            }
        }
    }

    fn remove(&mut self, partition: &i32) -> Option<Slot> {
        let dense = self
            .index(*partition)
            .and_then(|at| self.dense.get_mut(at)?.take());
        let removed = dense.or_else(|| self.sparse.remove(partition));
        self.len -= usize::from(removed.is_some());
        removed
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `(partition, slot)` of every state znode, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (i32, &Slot)> {
        let dense = self.dense.iter().enumerate().filter_map(|(at, slot)| {
            let partition = i32::try_from(at).expect("dense ids are partition ids");
            slot.as_ref().map(|slot| (partition, slot))
        });
        dense.chain(self.sparse.iter().map(|(&p, slot)| (p, slot)))
    }
}

/// Each partition's history rows, by topic and partition.
type History = HashMap<Arc<str>, HashMap<i32, Vec<HistoryRow>>>;

#[derive(Debug, Default)]
pub struct StateTable {
    topics: HashMap<Arc<str>, Slots>,
    /// Write sequence shared with the Python tree's history, so both can be merged in order.
    seq: u64,
    /// Rows by topic and partition: a partition's history is read without passing over its
    /// topic's other rows (a simulation reads it for each partition a step changed).
    history: Option<History>,
}

impl StateTable {
    pub fn new(record_history: bool) -> Self {
        Self {
            history: record_history.then(HashMap::default),
            ..Self::default()
        }
    }

    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn topic(&mut self, topic: &str) -> &mut Slots {
        if !self.topics.contains_key(topic) {
            self.topics.insert(Arc::from(topic), Slots::default());
        }
        self.topics.get_mut(topic).expect("just inserted")
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&Slot> {
        self.topics.get(topic)?.get(&partition)
    }

    /// Add a history row (a state written, or None for a deletion); returns its sequence number,
    /// 0 when history is not recorded.
    fn record(
        &mut self,
        topic: &str,
        partition: i32,
        state: Option<LeaderIsrAndControllerEpoch>,
    ) -> u64 {
        if self.history.is_none() {
            return 0;
        }
        let seq = self.next_seq();
        let history = self.history.as_mut().expect("checked above");
        let key = match history.get_key_value(topic) {
            Some((k, _)) => k.clone(),
            None => Arc::from(topic),
        };
        history
            .entry(key)
            .or_default()
            .entry(partition)
            .or_default()
            .push(HistoryRow {
                seq,
                partition,
                state,
            });
        seq
    }

    /// History keeps the partition states written; corrupt data planted by tests leaves no row.
    fn record_written(
        &mut self,
        topic: &str,
        partition: i32,
        state: &Option<LeaderIsrAndControllerEpoch>,
    ) -> u64 {
        match state {
            Some(state) => self.record(topic, partition, Some(state.clone())),
            None => 0,
        }
    }

    /// Create a state znode; returns the history row's sequence number (see [`Self::record`]).
    pub fn create(
        &mut self,
        topic: &str,
        partition: i32,
        state: Option<LeaderIsrAndControllerEpoch>,
        zxid: i64,
    ) -> Result<u64, WriteError> {
        let slots = self.topic(topic);
        if slots.contains_key(&partition) {
            return Err(WriteError::NodeExists);
        }
        slots.insert(
            partition,
            Slot {
                state: state.clone(),
                version: 0,
                czxid: zxid,
                mzxid: zxid,
            },
        );
        Ok(self.record_written(topic, partition, &state))
    }

    /// Write a state conditional on `expected` (-1: any version); returns the new version and
    /// the history row's sequence number.
    pub fn set(
        &mut self,
        topic: &str,
        partition: i32,
        state: Option<LeaderIsrAndControllerEpoch>,
        expected: i32,
        zxid: i64,
    ) -> Result<(i32, u64), WriteError> {
        let slots = self.topics.get_mut(topic).ok_or(WriteError::NoNode)?;
        let (version, kept) = write_slot(
            slots,
            partition,
            state,
            expected,
            zxid,
            self.history.is_some(),
        )?;
        Ok((version, self.record_written(topic, partition, &kept)))
    }

    fn remove(&mut self, topic: &str, partition: i32) -> Option<Slot> {
        let slots = self.topics.get_mut(topic)?;
        let slot = slots.remove(&partition)?;
        if slots.is_empty() {
            self.topics.remove(topic);
        }
        Some(slot)
    }

    /// Delete a state znode; returns it and the history row's sequence number.
    pub fn delete(&mut self, topic: &str, partition: i32) -> Result<(Slot, u64), WriteError> {
        let slot = self.remove(topic, partition).ok_or(WriteError::NoNode)?;
        Ok((slot, self.record(topic, partition, None)))
    }

    /// Put a slot back exactly as it was and drop the history row `seq` (0: none), undoing a
    /// write of an aborted transaction.
    pub fn restore(&mut self, topic: &str, partition: i32, slot: Option<Slot>, seq: u64) {
        match slot {
            Some(slot) => {
                self.topic(topic).insert(partition, slot);
            }
            None => {
                self.remove(topic, partition);
            }
        }
        if seq == 0 {
            return;
        }
        let rows = self
            .history
            .as_mut()
            .and_then(|h| h.get_mut(topic))
            .and_then(|partitions| partitions.get_mut(&partition));
        if let Some(rows) = rows {
            if let Some(at) = rows.iter().rposition(|r| r.seq == seq) {
                rows.remove(at);
            }
        }
    }

    /// A deleted topic's history goes with it (a re-created topic starts a history of its own).
    pub fn forget_history(&mut self, topic: &str) {
        if let Some(history) = &mut self.history {
            history.remove(topic);
        }
    }

    pub fn history(&self, topic: &str, partition: i32) -> Option<Vec<&HistoryRow>> {
        let history = self.history.as_ref()?;
        Some(
            history
                .get(topic)
                .and_then(|partitions| partitions.get(&partition))
                .map(|rows| rows.iter().collect())
                .unwrap_or_default(),
        )
    }

    /// Conditional updates of one topic's partitions as the store's bulk update does them: each
    /// state written at `partition_epoch + 1`, stamped with `controller_epoch`, and returned with
    /// the znode's new version (the same but for an unconditional write, `partition_epoch` -1);
    /// the topic is looked up once.
    pub fn update_states<'a>(
        &mut self,
        topic: &str,
        updates: impl IntoIterator<Item = (i32, &'a LeaderAndIsr)>,
        controller_epoch: i32,
        zxid: i64,
    ) -> Vec<Result<LeaderAndIsr, WriteError>> {
        let keep = self.history.is_some();
        let mut slots = self.topics.get_mut(topic);
        let mut kept = Vec::new();
        let results = updates
            .into_iter()
            .map(|(partition, lai)| {
                let slots = slots.as_deref_mut().ok_or(WriteError::NoNode)?;
                let mut written = lai.clone();
                written.partition_epoch = lai.partition_epoch + 1;
                let stored = LeaderIsrAndControllerEpoch {
                    leader_and_isr: written.clone(),
                    controller_epoch,
                };
                let (version, state) = write_slot(
                    slots,
                    partition,
                    Some(stored),
                    lai.partition_epoch,
                    zxid,
                    keep,
                )?;
                kept.push((partition, state));
                written.partition_epoch = version;
                Ok(written)
            })
            .collect();
        for (partition, state) in kept {
            self.record_written(topic, partition, &state);
        }
        results
    }

    /// One topic's slots, for reads of many of its partitions.
    pub fn topic_slots(&self, topic: &str) -> Option<&Slots> {
        self.topics.get(topic)
    }

    /// The state znodes created or changed by a transaction after `zxid` (their mzxid is larger),
    /// sorted.
    pub fn modified_since(&self, zxid: i64) -> Vec<(&str, i32)> {
        let mut found: Vec<_> = self
            .topics
            .iter()
            .flat_map(|(topic, slots)| {
                slots
                    .iter()
                    .filter(move |(_, slot)| slot.mzxid > zxid)
                    .map(move |(p, _)| (&**topic, p))
            })
            .collect();
        found.sort_unstable();
        found
    }

    pub fn len(&self) -> usize {
        self.topics.values().map(Slots::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }
}

/// Write `state` into a slot if its version is `expected` (-1: any); returns the new version and,
/// when `keep`, a copy of the state for the history.
fn write_slot(
    slots: &mut Slots,
    partition: i32,
    state: Option<LeaderIsrAndControllerEpoch>,
    expected: i32,
    zxid: i64,
    keep: bool,
) -> Result<(i32, Option<LeaderIsrAndControllerEpoch>), WriteError> {
    let slot = slots.get_mut(&partition).ok_or(WriteError::NoNode)?;
    if expected != -1 && slot.version != expected {
        return Err(WriteError::BadVersion(slot.version));
    }
    slot.version += 1;
    slot.mzxid = zxid;
    let kept = if keep { state.clone() } else { None };
    slot.state = state;
    Ok((slot.version, kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lice(leader: i32, version: i32) -> LeaderIsrAndControllerEpoch {
        let mut lai = LeaderAndIsr::new(leader, smallvec::smallvec![leader]);
        lai.partition_epoch = version;
        LeaderIsrAndControllerEpoch {
            leader_and_isr: lai,
            controller_epoch: 1,
        }
    }

    #[test]
    fn versions_conditions_and_history() {
        let mut table = StateTable::new(true);
        table.create("t", 0, Some(lice(1, 0)), 5).unwrap();
        assert_eq!(table.create("t", 0, None, 6), Err(WriteError::NodeExists));
        let (two, three) = (lice(2, 0).leader_and_isr, lice(3, 0).leader_and_isr);
        let results = table.update_states("t", [(0, &two), (0, &three), (1, &three)], 3, 7);
        let written = results[0].as_ref().unwrap();
        assert_eq!((written.leader, written.partition_epoch), (2, 1));
        assert_eq!(
            results[1..],
            [Err(WriteError::BadVersion(1)), Err(WriteError::NoNode)]
        );
        assert_eq!(
            table.update_states("u", [(0, &three)], 3, 8),
            [Err(WriteError::NoNode)]
        );
        let slot = table.get("t", 0).unwrap();
        assert_eq!((slot.version, slot.czxid, slot.mzxid), (1, 5, 7));
        assert_eq!(table.history("t", 0).unwrap().len(), 2);
        let before = table.get("t", 0).cloned();
        let (_, seq) = table.set("t", 0, Some(lice(4, 1)), -1, 9).unwrap();
        assert_eq!(table.history("t", 0).unwrap().len(), 3);
        table.restore("t", 0, before.clone(), seq);
        assert_eq!(table.get("t", 0).cloned(), before);
        assert_eq!(
            table.history("t", 0).unwrap().len(),
            2,
            "the undone write left no history"
        );
        let (_, seq) = table.delete("t", 0).unwrap();
        assert_eq!(table.history("t", 0).unwrap().last().unwrap().state, None);
        table.restore("t", 0, before.clone(), seq);
        assert_eq!(table.get("t", 0).cloned(), before);
        table.set("t", 0, None, -1, 10).unwrap();
        assert_eq!(
            table.history("t", 0).unwrap().len(),
            2,
            "corrupt data leaves no row"
        );
        table.forget_history("t");
        assert!(table.history("t", 0).unwrap().is_empty());
    }

    #[test]
    fn an_unconditional_update_answers_the_znodes_version() {
        let mut table = StateTable::new(false);
        table.create("t", 0, Some(lice(1, 0)), 1).unwrap();
        table.set("t", 0, Some(lice(1, 1)), -1, 2).unwrap();
        let any = lice(2, -1).leader_and_isr;
        let results = table.update_states("t", [(0, &any)], 3, 3);
        assert_eq!(results[0].as_ref().unwrap().partition_epoch, 2);
        assert_eq!(table.get("t", 0).unwrap().version, 2);
    }

    #[test]
    fn slots_far_apart_and_negative_ids_are_kept_apart() {
        let mut table = StateTable::new(false);
        for partition in [0, 5, -1, i32::MAX, 3000, 2] {
            table
                .create("t", partition, Some(lice(partition, 0)), 1)
                .unwrap();
        }
        assert_eq!(table.len(), 6);
        for partition in [0, 5, -1, i32::MAX, 3000, 2] {
            assert_eq!(
                table.get("t", partition).unwrap().state,
                Some(lice(partition, 0))
            );
        }
        assert!(table.get("t", 1).is_none() && table.get("t", 2999).is_none());
        table.set("t", 3000, None, 0, 2).unwrap();
        assert_eq!(table.modified_since(1), [("t", 3000)]);
        for partition in [0, 5, -1, i32::MAX, 3000, 2] {
            table.delete("t", partition).unwrap();
        }
        assert!(table.is_empty() && table.get("t", 0).is_none());
    }
}
