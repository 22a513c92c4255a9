//! The Python objects payloads' rows share: one `TopicPartition` per partition and one tuple per
//! broker list, kept across payloads so that the brokers' tables hold one object for each (see
//! `KEYS` and `LISTS`). Rows fill both, and a broker's answers (`PartitionErrors`) fill `KEYS`,
//! in a broker process too, whose peer names whatever topics it likes. So each is swept of the
//! objects only it still references (garbage: no table uses them any more) once it has grown
//! past twice what the previous sweep kept: a table stays within a constant factor of the objects
//! in use, for an amortised O(1) per insert.

use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::hash::{HashMap, NameMap};
use crate::model::Brokers;
use crate::py::classes::classes;

/// Entries a table holds before it is first swept: sweeping a small table would buy nothing.
const SWEEP_FLOOR: usize = 4096;

/// The `TopicPartition` of each of `named`'s partitions (`(topic, partition id, _)`), with the
/// topic's interned string: the one made for that partition by an earlier payload's rows (see
/// `KEYS`), or a new one, built as `tuple.__new__` builds it (without the NamedTuple's Python
/// constructor). The lock is never held while Python runs.
pub(crate) fn keys<'py>(
    named: &[(&Arc<str>, i32, usize)],
    py: Python<'py>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut found: Vec<Option<Bound<'py, PyAny>>> = Vec::with_capacity(named.len());
    {
        let known = locked(&KEYS);
        let mut last: Option<(&Arc<str>, Option<&TopicKeys>)> = None;
        for &(topic, id, _) in named {
            let of_topic = match last {
                Some((t, keys)) if Arc::ptr_eq(t, topic) => keys,
                _ => known.topics.get(&**topic),
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
    let mut known = locked(&KEYS);
    let Keys { topics, len, .. } = &mut *known;
    for (i, key) in made {
        let (topic, id, _) = named[i];
        let of_topic = topics.entry(topic.clone()).or_default();
        // Another thread's rows may have made one meanwhile: theirs is the one kept.
        let kept = of_topic.entry(id).or_insert_with(|| {
            *len += 1;
            key.unbind()
        });
        found[i] = Some(kept.bind(py).clone());
    }
    // What this call returns is referenced by `found`: it is not swept.
    let swept = known.sweep(py);
    drop(known);
    drop(swept);
    Ok(found.into_iter().flatten().collect())
}

/// A tuple of each of `lists` (ISRs, replicas, adding replicas): the one made for an equal list
/// by an earlier payload's rows (see `LISTS`), or a new one. The lock is never held while
/// Python runs.
pub(super) fn broker_lists<'py>(
    lists: &[&[i32]],
    py: Python<'py>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut found: Vec<Option<Bound<'py, PyTuple>>> = {
        let known = locked(&LISTS);
        (lists.iter())
            .map(|list| known.tuples.get(*list).map(|t| t.bind(py).clone()))
            .collect()
    };
    let mut made = Vec::new();
    for (i, (list, tuple)) in lists.iter().zip(&found).enumerate() {
        if tuple.is_none() {
            made.push((i, PyTuple::new(py, *list)?));
        }
    }
    if !made.is_empty() {
        let mut known = locked(&LISTS);
        for (i, tuple) in made {
            let kept = (known.tuples.entry(Brokers::from_slice(lists[i])))
                .or_insert_with(|| tuple.unbind());
            found[i] = Some(kept.bind(py).clone());
        }
        let swept = known.sweep(py);
        drop(known);
        drop(swept);
    }
    Ok(found.into_iter().flatten().collect())
}

/// How many `TopicPartition`s and broker-list tuples the tables hold.
pub fn sizes() -> (usize, usize) {
    (locked(&KEYS).len, locked(&LISTS).tuples.len())
}

fn locked<T>(table: &Mutex<T>) -> MutexGuard<'_, T> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// When a table is swept next: once it holds more than twice what the previous sweep kept.
#[derive(Debug, Default)]
struct Sweeps {
    kept: usize,
}

impl Sweeps {
    fn due(&self, len: usize) -> bool {
        len > SWEEP_FLOOR.max(2 * self.kept)
    }
}

/// Whether only the table (which holds `object`) references it. The GIL is held, so no other
/// thread changes the count meanwhile.
fn unused<T>(object: &Py<T>, py: Python<'_>) -> bool {
    object.get_refcnt(py) == 1
}

/// The tuple of each broker list some payload's rows carried, kept for the rows that carry an
/// equal one next: the replicas then share a tuple per distinct list (a few per replica set)
/// instead of holding two or three each, and rows allocate none.
#[derive(Debug, Default)]
struct Lists {
    tuples: HashMap<Brokers, Py<PyTuple>>,
    sweeps: Sweeps,
}

impl Lists {
    /// The tuples no longer used, taken out if a sweep is due (the caller drops them once the
    /// lock is released).
    fn sweep(&mut self, py: Python<'_>) -> Vec<Py<PyTuple>> {
        let mut swept = Vec::new();
        if self.sweeps.due(self.tuples.len()) {
            swept.extend((self.tuples.extract_if(|_, tuple| unused(tuple, py))).map(|(_, t)| t));
            self.sweeps.kept = self.tuples.len();
        }
        swept
    }
}

static LISTS: LazyLock<Mutex<Lists>> = LazyLock::new(Default::default);

/// The `TopicPartition` of each partition some payload's rows named, by topic and partition id,
/// kept for the rows that name it next: the broker agents' and replica managers' tables then
/// hold one key object per partition (not one per broker and table), and a row's key is found in
/// them by identity, without reading the stored key and its partition number, objects of a
/// hundred brokers' tables the processor's caches no longer hold.
#[derive(Debug, Default)]
struct Keys {
    topics: NameMap<Arc<str>, TopicKeys>,
    /// The keys of all topics.
    len: usize,
    sweeps: Sweeps,
}

/// The keys of one topic's partitions, by partition id.
type TopicKeys = HashMap<i32, Py<PyAny>>;

impl Keys {
    /// See [`Lists::sweep`]; a topic left without keys is removed.
    fn sweep(&mut self, py: Python<'_>) -> Vec<Py<PyAny>> {
        let mut swept = Vec::new();
        if self.sweeps.due(self.len) {
            self.topics.retain(|_, keys| {
                swept.extend(keys.extract_if(|_, key| unused(key, py)).map(|(_, k)| k));
                !keys.is_empty()
            });
            self.len -= swept.len();
            self.sweeps.kept = self.len;
        }
        swept
    }
}

static KEYS: LazyLock<Mutex<Keys>> = LazyLock::new(Default::default);
