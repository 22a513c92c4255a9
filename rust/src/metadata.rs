//! A simulated broker's metadata cache: the partition states of the UpdateMetadata requests it
//! received (Kafka's `ZkMetadataCache`), with a digest of its contents.
//!
//! A simulated cluster of a hundred brokers applies every UpdateMetadata fan-out a hundred times,
//! and checks after every quiet point that each cache matches the store (invariant I7). So a cache
//! entry is plain data (its fields, and its broker lists as an id in a [`ListTable`] of the
//! distinct lists, made once per stored payload entry), partitions are indexed by id, and the
//! digest (a wrapping sum of one [`metadata_digest`] per cached partition) lets that check compare
//! one number per broker instead of every partition.
//!
//! The caches of a cluster's brokers hold the same states nearly all the time, and receive the
//! same fan-outs in the same order. So a cache's contents are immutable and shared ([`Contents`]:
//! topics of chunks of partitions, each behind an `Arc`, copied on write), and a payload remembers
//! what it did to each cache state it was applied to ([`Applied`]): the first broker of a fan-out
//! applies it, copying the chunks it changes, and every other broker in the same state takes the
//! result. A broker whose cache came to the same contents by another way (a restarted broker, from
//! its full UpdateMetadata) joins the others' state once the two are found equal, entry for entry.
//! Each broker's cache still holds exactly what it was sent, whenever it is read.

use std::cell::RefCell;
use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

use rustc_hash::FxHasher;

use crate::hash::{IndexSet, NameMap};
use crate::model::{BrokerId, Brokers, LEADER_DURING_DELETE};
use crate::requests::{UpdateMetadataEntries, UpdateMetadataEntry};

/// The partition metadata that a cache and the store must agree on, hashed: the key, leader,
/// leader epoch, ISR, partition epoch and replicas (not the controller epoch, which the store keeps
/// per write, nor the offline replicas, which it does not keep).
pub fn metadata_digest(
    topic: &str,
    partition: i32,
    leader: BrokerId,
    leader_epoch: i32,
    isr: &[BrokerId],
    partition_epoch: i32,
    replicas: &[BrokerId],
) -> u64 {
    let mut h = FxHasher::default();
    h.write(topic.as_bytes());
    h.write_u8(0xff); // "ab"+"c" and "a"+"bc" differ
    for value in [partition, leader, leader_epoch, partition_epoch] {
        h.write_i32(value);
    }
    for list in [isr, replicas] {
        h.write_usize(list.len());
        for &broker in list {
            h.write_i32(broker);
        }
    }
    mix(h.finish())
}

/// splitmix64's finaliser: FxHash's output is not uniform enough for a sum of many hashes.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The digest of an UpdateMetadata entry for `topic`-`partition` (its `part` is not used).
pub fn entry_digest(topic: &str, partition: i32, e: &UpdateMetadataEntry) -> u64 {
    metadata_digest(
        topic,
        partition,
        e.leader,
        e.leader_epoch,
        &e.isr,
        e.partition_epoch,
        &e.replicas,
    )
}

/// The entries of one UpdateMetadata payload, shared by every cache that applied it.
pub type Payload = Arc<UpdateMetadataEntries>;

/// The keys of a payload's entries: each run of entries of one topic (its name and length), and
/// each entry's partition id. A payload's name of a topic is one shared `Arc`.
pub type Keys<'a> = (&'a [(Arc<str>, usize)], &'a [i32]);

/// The `(topic, partition)` of entry `i` (reading the runs: for the rare removed partition).
pub fn key_at((runs, partitions): Keys<'_>, i: usize) -> (&str, i32) {
    let mut start = 0;
    for (topic, n) in runs {
        if i < start + n {
            return (topic, partitions[i]);
        }
        start += n;
    }
    panic!("entry {i} of {start}")
}

/// A cached entry's broker lists: ISR, replicas and offline replicas.
type Lists = [Brokers; 3];

/// The distinct broker lists of the entries the caches hold, each stored once: a cached entry
/// holds the id of its lists, so that it is plain data and a chunk of them is copied with one
/// `memcpy` (where a reference to its payload's entry meant a reference count per entry). A
/// cluster's lists are few (replica assignments of RF brokers, their ISRs and offline subsets),
/// and the table lives only while a cache or a payload's [`ListIds`] holds it.
///
/// A table only grows (a slot holds no count of its lists' users), and a broker process's peer
/// may send ever-new lists: so once it holds more than [`RETIRE_FLOOR`] lists and twice those
/// the caches moved into it ([`Retirement`]), it is retired. [`ListTable::current`] then hands
/// out a new one, each cache moves its contents there on its next apply (re-interning only the
/// lists its slots use), and the retired table is freed once nothing holds it. One table is
/// current at a time, so every cache that has applied since the last retirement holds ids of
/// the same table.
#[derive(Debug, Default)]
pub struct ListTable {
    interned: RwLock<IndexSet<Lists>>,
    /// Out of line: with it inline the table's allocation changed size class, and the full-size
    /// roll's peak RSS grew by 10 MiB (allocator layout alone: padding did the same).
    retirement: Box<Retirement>,
}

/// When a [`ListTable`] is retired, and where its caches moved.
#[derive(Debug, Default)]
struct Retirement {
    /// How many lists the table held after caches last moved their contents into it.
    filled: AtomicUsize,
    retired: AtomicBool,
    /// While retired, the states caches left it from and the state in the current table each
    /// moved to: the other caches in a state move to the same new one, and keep sharing it.
    moved: Mutex<Vec<(Weak<Contents>, Arc<Contents>)>>,
}

/// Lists a table holds at least before it is retired: a simulated cluster's fit (fewer than
/// 32,768 at 100 brokers and 100,000 partitions), so its caches never move.
const RETIRE_FLOOR: usize = 65_536;

/// The lists of all live tables (retired ones included).
static HELD_LISTS: AtomicUsize = AtomicUsize::new(0);

/// How many lists the live [`ListTable`]s hold, together.
pub fn held_lists() -> usize {
    HELD_LISTS.load(Relaxed)
}

/// A cached entry's broker lists, borrowed: hashed as [`Lists`] are, to look them up without a copy.
#[derive(Hash)]
struct ListsRef<'a>([&'a [BrokerId]; 3]);

impl indexmap::Equivalent<Lists> for ListsRef<'_> {
    fn equivalent(&self, lists: &Lists) -> bool {
        self.0.iter().zip(lists).all(|(a, b)| **a == **b)
    }
}

/// The lists id of a vacant slot (never given to lists).
const VACANT: u32 = u32::MAX;

impl ListTable {
    /// The table alive and not retired, or a new one if none is.
    fn current() -> Arc<ListTable> {
        let fresh = |current: &Mutex<Weak<ListTable>>| {
            let mut current = current.lock().unwrap_or_else(PoisonError::into_inner);
            (current.upgrade())
                .filter(|table| !table.is_retired())
                .unwrap_or_else(|| {
                    let table = Arc::new(ListTable::default());
                    *current = Arc::downgrade(&table);
                    table
                })
        };
        #[cfg(not(test))]
        {
            static CURRENT: Mutex<Weak<ListTable>> = Mutex::new(Weak::new());
            fresh(&CURRENT)
        }
        #[cfg(test)]
        {
            thread_local! {
                /// One per test (each runs on a thread of its own), so that one test's
                /// retirements do not move the caches of another that compares tables.
                static CURRENT: Mutex<Weak<ListTable>> = const { Mutex::new(Weak::new()) };
            }
            CURRENT.with(fresh)
        }
    }

    fn is_retired(&self) -> bool {
        self.retirement.retired.load(Relaxed)
    }

    /// The ids of `entries`' lists, adding those not in the table yet (and retiring it if that
    /// takes it past its bound).
    fn intern<'a>(&self, entries: impl Iterator<Item = &'a UpdateMetadataEntry>) -> Vec<u32> {
        let mut interned = self
            .interned
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let ids = entries
            .map(|e| {
                Self::id(
                    &mut interned,
                    ListsRef([&e.isr, &e.replicas, &e.offline_replicas]),
                )
            })
            .collect();
        let retirement = &self.retirement;
        if interned.len() > RETIRE_FLOOR.max(2 * retirement.filled.load(Relaxed)) {
            retirement.retired.store(true, Relaxed);
        }
        ids
    }

    /// The id of `lists` in `interned` (a table's, locked), added if it is not there.
    fn id(interned: &mut IndexSet<Lists>, lists: ListsRef<'_>) -> u32 {
        let id = interned.get_index_of(&lists).unwrap_or_else(|| {
            HELD_LISTS.fetch_add(1, Relaxed);
            interned.insert_full(lists.0.map(Brokers::from_slice)).0
        });
        u32::try_from(id)
            .ok()
            .filter(|&id| id != VACANT)
            .expect("fewer than 2^32 - 1 distinct broker lists")
    }

    /// The id in `table` of the lists of entry `at` of `payload` (its stored run's ids are made
    /// on first use).
    fn id_of(table: &Arc<ListTable>, payload: &Payload, at: usize) -> u32 {
        let (stored, i) = payload.stored_at(at);
        let ids = stored.lists.get_or_init(|| ListIds {
            table: table.clone(),
            ids: table.intern(stored.entries.iter()),
        });
        if Arc::ptr_eq(&ids.table, table) {
            ids.ids[i]
        } else {
            // Made for a table retired since (or for the retired one this cache moves out of
            // next): looked up here.
            table.intern(std::iter::once(&stored.entries[i]))[0]
        }
    }

    fn lists(&self, id: u32) -> Lists {
        let interned = self.interned.read().unwrap_or_else(PoisonError::into_inner);
        interned[id as usize].clone()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        let interned = self.interned.read().unwrap_or_else(PoisonError::into_inner);
        interned.len()
    }
}

impl Drop for ListTable {
    fn drop(&mut self) {
        let interned = self
            .interned
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        HELD_LISTS.fetch_sub(interned.len(), Relaxed);
    }
}

/// The ids of a run of stored entries' lists in a [`ListTable`] (which they keep alive).
#[derive(Debug)]
pub struct ListIds {
    table: Arc<ListTable>,
    ids: Vec<u32>,
}

/// Partitions per chunk: what a cache copies to change one partition of a shared state.
const CHUNK: usize = 64;

/// A cached partition: its state after the key, its lists by id, and its [`entry_digest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    controller_epoch: i32,
    leader: BrokerId,
    leader_epoch: i32,
    partition_epoch: i32,
    lists: u32,
    digest: u64,
}

const EMPTY: Slot = Slot {
    controller_epoch: 0,
    leader: 0,
    leader_epoch: 0,
    partition_epoch: 0,
    lists: VACANT,
    digest: 0,
};

impl Slot {
    fn is_vacant(&self) -> bool {
        self.lists == VACANT
    }

    /// A hash of all a reader sees of it (the controller epoch and offline replicas too, which
    /// the digest leaves out): two cache states whose sums of these agree are compared entry for
    /// entry before one is taken for the other.
    fn exact_digest(&self) -> u64 {
        let mut h = FxHasher::default();
        h.write_u64(self.digest);
        h.write_i32(self.controller_epoch);
        h.write_u32(self.lists);
        mix(h.finish())
    }

    fn entry(&self, table: &ListTable) -> UpdateMetadataEntry {
        let [isr, replicas, offline_replicas] = table.lists(self.lists);
        UpdateMetadataEntry {
            part: 0,
            controller_epoch: self.controller_epoch,
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            isr,
            partition_epoch: self.partition_epoch,
            replicas,
            offline_replicas,
        }
    }
}

type Chunk = [Slot; CHUNK];

fn same_chunk(a: Option<&Arc<Chunk>>, b: Option<&Arc<Chunk>>) -> bool {
    const VACANT_CHUNK: &Chunk = &[EMPTY; CHUNK];
    let (a, b) = (
        a.map_or(VACANT_CHUNK, |c| &**c),
        b.map_or(VACANT_CHUNK, |c| &**c),
    );
    std::ptr::eq(a, b) || a == b
}

/// Chunks kept for reuse, at most.
const SPARE_CHUNKS: usize = 1024;

thread_local! {
    /// Chunks of states no cache is in any more, reused for the next copies: a roll copies and
    /// frees hundreds of thousands, and mimalloc, handed them back, kept preparing fresh pages
    /// for them (about 40 % of the caches' native time).
    static SPARE: RefCell<Vec<Arc<Chunk>>> = const { RefCell::new(Vec::new()) };
}

/// One topic's cached partitions, indexed by partition id (ids are dense from 0) in chunks.
#[derive(Clone, Debug, Default)]
struct Partitions {
    chunks: Vec<Option<Arc<Chunk>>>,
    len: usize,
}

impl Drop for Partitions {
    fn drop(&mut self) {
        let chunks = self.chunks.drain(..).flatten();
        // Without the thread's spares (as it exits), the chunks are freed.
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            for mut chunk in chunks {
                if spare.len() < SPARE_CHUNKS && Arc::get_mut(&mut chunk).is_some() {
                    spare.push(chunk);
                }
            }
        });
    }
}

impl Partitions {
    /// Chunk `c` of `chunks`, writable: a copy of it (in a spare chunk if there is one) if it
    /// is shared.
    fn chunk_mut(chunks: &mut Vec<Option<Arc<Chunk>>>, c: usize) -> &mut Chunk {
        if chunks.len() <= c {
            chunks.resize(c + 1, None);
        }
        let chunk = &mut chunks[c];
        if chunk.as_mut().is_none_or(|c| Arc::get_mut(c).is_none()) {
            let mut copy = (SPARE
                .try_with(|spare| spare.borrow_mut().pop())
                .ok()
                .flatten())
            .unwrap_or_else(|| Arc::new([EMPTY; CHUNK]));
            *Arc::make_mut(&mut copy) = chunk.as_deref().copied().unwrap_or([EMPTY; CHUNK]);
            *chunk = Some(copy);
        }
        Arc::make_mut(chunk.get_or_insert_with(|| Arc::new([EMPTY; CHUNK])))
    }

    fn get(&self, id: usize) -> Option<&Slot> {
        let slot = &self.chunks.get(id / CHUNK)?.as_ref()?[id % CHUNK];
        (!slot.is_vacant()).then_some(slot)
    }

    fn same(&self, other: &Partitions) -> bool {
        self.len == other.len
            && (0..self.chunks.len().max(other.chunks.len())).all(|c| {
                same_chunk(
                    self.chunks.get(c).and_then(Option::as_ref),
                    other.chunks.get(c).and_then(Option::as_ref),
                )
            })
    }
}

/// A state of a cache, shared by the caches in it and copied on write.
#[derive(Clone, Debug)]
struct Contents {
    table: Arc<ListTable>,
    topics: NameMap<Arc<str>, Arc<Partitions>>,
    len: usize,
    digest: u64,
    exact: u64,
}

impl Default for Contents {
    fn default() -> Self {
        Self {
            table: ListTable::current(),
            topics: NameMap::default(),
            len: 0,
            digest: 0,
            exact: 0,
        }
    }
}

impl Contents {
    /// See [`MetadataCache::apply`].
    /// `digests`: the entries' digests if they were computed already (else computed here).
    fn apply(
        &mut self,
        (runs, ids): Keys<'_>,
        payload: &Payload,
        digests: Option<&[u64]>,
    ) -> Vec<usize> {
        let mut removed = Vec::new();
        let mut at = 0;
        for (topic, n) in runs {
            let run = &ids[at..at + n];
            let partitions = match self.topics.get_mut(&**topic) {
                Some(partitions) => partitions,
                None => self.topics.entry(topic.clone()).or_default(),
            };
            let Partitions { chunks, len } = Arc::make_mut(partitions);
            // The chunk written last, writable: a run's next partitions are mostly in it.
            let mut last: Option<(usize, &mut Chunk)> = None;
            for partition in run {
                let id = usize::try_from(*partition).expect("partition ids are not negative");
                let (c, i) = (id / CHUNK, id % CHUNK);
                let e = &payload[at];
                let deleting = e.leader == LEADER_DURING_DELETE;
                if last.as_ref().is_none_or(|(k, _)| *k != c) {
                    last = None;
                    let cached = (chunks.get(c).and_then(Option::as_ref))
                        .is_some_and(|chunk| !chunk[i].is_vacant());
                    if cached || !deleting {
                        last = Some((c, Partitions::chunk_mut(chunks, c)));
                    }
                }
                let slot = if deleting {
                    EMPTY
                } else {
                    Slot {
                        controller_epoch: e.controller_epoch,
                        leader: e.leader,
                        leader_epoch: e.leader_epoch,
                        partition_epoch: e.partition_epoch,
                        lists: ListTable::id_of(&self.table, payload, at),
                        digest: match digests {
                            Some(digests) => digests[at],
                            None => entry_digest(topic, *partition, e),
                        },
                    }
                };
                let old = match &mut last {
                    Some((_, chunk)) => std::mem::replace(&mut chunk[i], slot),
                    None => EMPTY,
                };
                if !slot.is_vacant() {
                    self.digest = self.digest.wrapping_add(slot.digest);
                    self.exact = self.exact.wrapping_add(slot.exact_digest());
                    *len += 1;
                    self.len += 1;
                }
                if !old.is_vacant() {
                    self.digest = self.digest.wrapping_sub(old.digest);
                    self.exact = self.exact.wrapping_sub(old.exact_digest());
                    *len -= 1;
                    self.len -= 1;
                    if deleting {
                        removed.push(at);
                    }
                }
                at += 1;
            }
            if *len == 0 {
                self.topics.remove(&**topic);
            }
        }
        removed
    }

    /// The same contents with their lists in `table` (ids re-interned, each list once).
    fn moved_to(&self, table: Arc<ListTable>) -> Contents {
        let mut exact = 0u64;
        let topics = {
            let old = self
                .table
                .interned
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let mut new = table
                .interned
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let mut ids = vec![VACANT; old.len()]; // old id -> new id
            let mut move_chunk = |chunk: &Chunk| {
                let mut copy = *chunk;
                for slot in copy.iter_mut().filter(|slot| !slot.is_vacant()) {
                    let id = &mut ids[slot.lists as usize];
                    if *id == VACANT {
                        let [isr, replicas, offline] = &old[slot.lists as usize];
                        *id = ListTable::id(&mut new, ListsRef([isr, replicas, offline]));
                    }
                    slot.lists = *id;
                    exact = exact.wrapping_add(slot.exact_digest());
                }
                Arc::new(copy)
            };
            let topics = (self.topics.iter())
                .map(|(topic, partitions)| {
                    let chunks = (partitions.chunks.iter())
                        .map(|chunk| chunk.as_deref().map(&mut move_chunk))
                        .collect();
                    let len = partitions.len;
                    (topic.clone(), Arc::new(Partitions { chunks, len }))
                })
                .collect();
            table.retirement.filled.fetch_max(new.len(), Relaxed);
            topics
        };
        Contents {
            table,
            topics,
            len: self.len,
            digest: self.digest,
            exact,
        }
    }

    /// Whether a reader sees the same in both (compared in full only when the digests agree).
    fn same(&self, other: &Contents) -> bool {
        (self.len, self.digest, self.exact, self.topics.len())
            == (other.len, other.digest, other.exact, other.topics.len())
            && Arc::ptr_eq(&self.table, &other.table)
            && self.topics.iter().all(|(topic, partitions)| {
                other
                    .topics
                    .get(topic)
                    .is_some_and(|o| Arc::ptr_eq(partitions, o) || partitions.same(o))
            })
    }
}

/// A payload applied to a cache in state `before` left it in state `after`, removing `removed`.
#[derive(Debug)]
struct Transition {
    before: Weak<Contents>,
    after: Weak<Contents>,
    removed: Vec<usize>,
}

/// What the caches that apply one payload share: its entries' digests (kept once a second cache
/// state applies it: the first computes them as it goes, and most payloads are applied once, the
/// other caches taking the state it led to), and the states it took caches from and to (held
/// weakly: a state lives while a cache is in it).
#[derive(Debug, Default)]
pub struct Applied {
    digests: OnceLock<Vec<u64>>,
    transitions: Mutex<Vec<Transition>>,
}

impl Applied {
    fn digests(&self, (runs, ids): Keys<'_>, payload: &Payload) -> &[u64] {
        self.digests.get_or_init(|| {
            let names = runs
                .iter()
                .flat_map(|(name, n)| std::iter::repeat_n(name, *n));
            (names.zip(ids).zip(payload.iter()))
                .map(|((topic, partition), e)| entry_digest(topic, *partition, e))
                .collect()
        })
    }
}

#[derive(Debug, Default)]
pub struct MetadataCache {
    contents: Arc<Contents>,
}

impl MetadataCache {
    /// Apply a payload (`applied` is the payload's own, shared with every cache it is applied
    /// to): entry `i` is the state of the `i`th key; a leader of -2 (the topic is being deleted)
    /// removes the partition. Returns the indices of the entries that removed a cached partition.
    /// Keys come grouped by topic, so a topic is looked up once per run of its partitions.
    ///
    /// A cache in a state the payload was already applied to takes the state that came of it;
    /// otherwise it applies the payload, copying what it changes of a shared state, and takes
    /// instead any state the payload led to that holds the same (so that caches that parted ways
    /// share again once they agree).
    pub fn apply(&mut self, keys: Keys<'_>, payload: &Payload, applied: &Applied) -> Vec<usize> {
        if keys.1.is_empty() {
            return Vec::new();
        }
        let mut transitions = applied
            .transitions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        transitions.retain(|t| t.after.strong_count() > 0);
        if let Some(removed) = self.take_transition(&transitions) {
            return removed;
        }
        if self.contents.table.is_retired() {
            self.leave_retired_table();
            if let Some(removed) = self.take_transition(&transitions) {
                return removed;
            }
        }
        // A state no other cache is in cannot be reached again: it is not recorded, and changed in place.
        let before = if Arc::strong_count(&self.contents) > 1 {
            Arc::downgrade(&self.contents)
        } else {
            Weak::new()
        };
        let kept = !transitions.is_empty() || applied.digests.get().is_some();
        let digests = kept.then(|| applied.digests(keys, payload));
        let removed = Arc::make_mut(&mut self.contents).apply(keys, payload, digests);
        let same = transitions
            .iter()
            .filter_map(|t| t.after.upgrade())
            .find(|c| c.same(&self.contents));
        if let Some(same) = same {
            self.contents = same;
        }
        transitions.push(Transition {
            before,
            after: Arc::downgrade(&self.contents),
            removed: removed.clone(),
        });
        removed
    }

    /// Takes the state a payload led the cache's state to, if it was applied to it already
    /// (`transitions`: the payload's); returns what it removed.
    fn take_transition(&mut self, transitions: &[Transition]) -> Option<Vec<usize>> {
        let here = Arc::as_ptr(&self.contents);
        let (after, removed) = (transitions.iter())
            .filter(|t| std::ptr::eq(t.before.as_ptr(), here))
            .find_map(|t| Some((t.after.upgrade()?, &t.removed)))?;
        self.contents = after;
        Some(removed.clone())
    }

    /// Moves the cache's contents out of their retired table into the current one: the caches
    /// in one state move to one new state (the first makes it, the others take it).
    fn leave_retired_table(&mut self) {
        let table = self.contents.table.clone();
        let mut moved = (table.retirement.moved.lock()).unwrap_or_else(PoisonError::into_inner);
        let here = Arc::as_ptr(&self.contents);
        let new = match moved
            .iter()
            .find(|(old, _)| std::ptr::eq(old.as_ptr(), here))
        {
            Some((_, new)) => new.clone(),
            None => {
                let new = Arc::new(self.contents.moved_to(ListTable::current()));
                if Arc::strong_count(&self.contents) > 1 {
                    moved.push((Arc::downgrade(&self.contents), new.clone()));
                }
                new
            }
        };
        self.contents = new;
        // A state no cache is in any more has no cache left to move.
        moved.retain(|(old, _)| old.strong_count() > 0);
    }

    /// The cached state of `topic`-`partition` (its `part` is 0).
    pub fn get(&self, topic: &str, partition: i32) -> Option<UpdateMetadataEntry> {
        let id = usize::try_from(partition).ok()?;
        let slot = self.contents.topics.get(topic)?.get(id)?;
        Some(slot.entry(&self.contents.table))
    }

    pub fn has_topic(&self, topic: &str) -> bool {
        self.contents.topics.contains_key(topic)
    }

    /// Every cached partition, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, UpdateMetadataEntry)> {
        let table = &self.contents.table;
        self.contents
            .topics
            .iter()
            .flat_map(move |(topic, partitions)| {
                partitions
                    .chunks
                    .iter()
                    .enumerate()
                    .flat_map(move |(c, chunk)| {
                        chunk
                            .iter()
                            .flat_map(|slots| slots.iter())
                            .enumerate()
                            .filter(|(_, slot)| !slot.is_vacant())
                            .map(move |(i, slot)| {
                                let partition =
                                    i32::try_from(c * CHUNK + i).expect("partition ids fit an i32");
                                (&**topic, partition, slot.entry(table))
                            })
                    })
            })
    }

    pub fn len(&self) -> usize {
        self.contents.len
    }

    pub fn is_empty(&self) -> bool {
        self.contents.len == 0
    }

    /// The wrapping sum of the cached partitions' [`metadata_digest`]s.
    pub fn digest(&self) -> u64 {
        self.contents.digest
    }

    /// Whether `other` is in the very same (shared) state.
    #[cfg(test)]
    fn shares_state_with(&self, other: &MetadataCache) -> bool {
        Arc::ptr_eq(&self.contents, &other.contents)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smallvec::smallvec;

    fn entry(leader: BrokerId, leader_epoch: i32) -> UpdateMetadataEntry {
        UpdateMetadataEntry {
            part: 0,
            controller_epoch: 1,
            leader,
            leader_epoch,
            isr: smallvec![1, 2],
            partition_epoch: 3,
            replicas: smallvec![1, 2],
            offline_replicas: smallvec![],
        }
    }

    /// `(topic, partition, entry)`s as one payload: its topic runs, partition ids, entries and
    /// what its caches share.
    type Sent = (Vec<(Arc<str>, usize)>, Vec<i32>, Payload, Applied);

    fn payload(items: &[(&Arc<str>, i32, UpdateMetadataEntry)]) -> Sent {
        let mut runs: Vec<(Arc<str>, usize)> = Vec::new();
        for (topic, _, _) in items {
            match runs.last_mut() {
                Some((last, n)) if Arc::ptr_eq(last, topic) => *n += 1,
                _ => runs.push(((*topic).clone(), 1)),
            }
        }
        let ids = items.iter().map(|(_, p, _)| *p).collect();
        let entries = items.iter().map(|(_, _, e)| e.clone()).collect();
        let entries = Arc::new(UpdateMetadataEntries::new(entries));
        (runs, ids, entries, Applied::default())
    }

    /// Apply a payload; returns the removed keys.
    fn apply(
        cache: &mut MetadataCache,
        (runs, ids, entries, applied): &Sent,
    ) -> Vec<(String, i32)> {
        let keys = (&runs[..], &ids[..]);
        (cache.apply(keys, entries, applied).into_iter())
            .map(|i| key_at(keys, i))
            .map(|(topic, partition)| (topic.to_string(), partition))
            .collect()
    }

    /// Apply `(topic, partition, entry)`s as a payload of their own; returns the removed keys.
    fn put(
        cache: &mut MetadataCache,
        items: &[(&Arc<str>, i32, UpdateMetadataEntry)],
    ) -> Vec<(String, i32)> {
        apply(cache, &payload(items))
    }

    fn contents(cache: &MetadataCache) -> Vec<(String, i32, UpdateMetadataEntry)> {
        let mut items: Vec<_> = cache.iter().map(|(t, p, e)| (t.to_owned(), p, e)).collect();
        items.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        items
    }

    #[test]
    fn digest_follows_contents_whatever_the_order() {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut one = MetadataCache::default();
        put(&mut one, &[(&a, 0, entry(1, 0)), (&b, 0, entry(2, 0))]);
        put(&mut one, &[(&a, 0, entry(2, 1))]);
        let mut two = MetadataCache::default();
        put(&mut two, &[(&b, 0, entry(2, 0)), (&a, 0, entry(2, 1))]);
        assert_eq!(one.digest(), two.digest());
        assert_eq!(one.len(), 2);
        assert_eq!(
            one.digest(),
            entry_digest("a", 0, &entry(2, 1)).wrapping_add(entry_digest("b", 0, &entry(2, 0)))
        );
        assert_eq!(one.get("a", 0), Some(entry(2, 1)));
        let mut three = MetadataCache::default();
        put(&mut three, &[(&a, 0, entry(2, 0)), (&b, 0, entry(2, 0))]);
        assert_ne!(one.digest(), three.digest());
    }

    #[test]
    fn leader_during_delete_removes_the_partition_and_its_topic() {
        let a: Arc<str> = "a".into();
        let mut cache = MetadataCache::default();
        put(&mut cache, &[(&a, 0, entry(1, 0)), (&a, 3, entry(1, 0))]);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get("a", 1), None);
        let gone = put(
            &mut cache,
            &[
                (&a, 0, entry(LEADER_DURING_DELETE, 0)),
                (&a, 0, entry(LEADER_DURING_DELETE, 0)),
            ],
        );
        assert_eq!(gone, [("a".to_string(), 0)]);
        assert!(cache.has_topic("a"));
        assert_eq!(
            put(&mut cache, &[(&a, 3, entry(LEADER_DURING_DELETE, 0))]).len(),
            1
        );
        assert!(!cache.has_topic("a") && cache.is_empty() && cache.digest() == 0);
    }

    #[test]
    fn caches_in_one_state_share_what_a_payload_made_of_it() {
        let a: Arc<str> = "a".into();
        let mut first = MetadataCache::default();
        put(&mut first, &[(&a, 0, entry(1, 0)), (&a, 100, entry(1, 0))]);
        let mut second = MetadataCache {
            contents: first.contents.clone(),
        };
        let mut third = MetadataCache {
            contents: first.contents.clone(),
        };
        let change = payload(&[(&a, 100, entry(2, 1))]);
        apply(&mut first, &change);
        apply(&mut second, &change);
        assert!(first.shares_state_with(&second));
        assert_eq!(second.get("a", 100), Some(entry(2, 1)));
        // The third missed it: it keeps its own state, and what it is sent next is its own.
        assert_eq!(third.get("a", 100), Some(entry(1, 0)));
        let next = payload(&[(&a, 0, entry(3, 2))]);
        apply(&mut first, &next);
        apply(&mut third, &next);
        assert!(!first.shares_state_with(&third));
        assert_eq!(
            (third.get("a", 0), third.get("a", 100)),
            (Some(entry(3, 2)), Some(entry(1, 0)))
        );
        assert_eq!(
            (first.get("a", 0), first.get("a", 100)),
            (Some(entry(3, 2)), Some(entry(2, 1)))
        );
        // Once the third is sent what it missed, it holds the same as the first: it joins its state.
        apply(&mut third, &payload(&[(&a, 100, entry(2, 1))]));
        let last = payload(&[(&a, 1, entry(1, 0))]);
        apply(&mut first, &last);
        apply(&mut third, &last);
        assert!(first.shares_state_with(&third));
        assert_eq!(contents(&first).len(), 3);
        // The second, one payload behind, still takes the state the first was in.
        apply(&mut second, &next);
        assert_eq!(
            contents(&second),
            contents(&{
                let mut c = MetadataCache::default();
                put(&mut c, &[(&a, 0, entry(3, 2)), (&a, 100, entry(2, 1))]);
                c
            })
        );
    }

    #[test]
    fn states_that_differ_only_in_what_the_digest_leaves_out_are_not_shared() {
        let a: Arc<str> = "a".into();
        let mut offline = entry(1, 0);
        offline.offline_replicas = smallvec![2];
        let mut one = MetadataCache::default();
        put(&mut one, &[(&a, 0, offline.clone())]);
        let mut two = MetadataCache::default();
        put(&mut two, &[(&a, 0, entry(1, 0))]);
        assert_eq!(one.digest(), two.digest());
        let next = payload(&[(&a, 1, entry(1, 0))]);
        apply(&mut one, &next);
        apply(&mut two, &next);
        assert!(!one.shares_state_with(&two));
        assert_eq!(one.get("a", 0), Some(offline));
        assert_eq!(two.get("a", 0), Some(entry(1, 0)));
    }

    #[test]
    fn topic_and_partition_boundaries_change_the_digest() {
        let e = entry(1, 0);
        assert_ne!(entry_digest("ab", 1, &e), entry_digest("a", 1, &e));
        assert_ne!(entry_digest("t", 1, &e), entry_digest("t", 2, &e));
    }

    #[test]
    fn broker_lists_are_stored_once_and_looked_up_once_per_stored_entry() {
        let a: Arc<str> = "a".into();
        let mut offline = entry(1, 0);
        offline.offline_replicas = smallvec![2];
        let sent = payload(&[
            (&a, 0, entry(1, 0)),
            (&a, 1, offline.clone()),
            (&a, 2, entry(2, 0)),
        ]);
        let mut one = MetadataCache::default();
        apply(&mut one, &sent);
        let (stored, _) = sent.2.stored_at(0);
        let ids = stored.lists.get().expect("made when first applied");
        assert!(Arc::ptr_eq(&ids.table, &one.contents.table));
        // Entries 0 and 2 have the same lists, entry 1 others.
        assert_eq!(ids.ids[0], ids.ids[2]);
        assert_ne!(ids.ids[0], ids.ids[1]);
        assert_eq!(
            one.contents.table.lists(ids.ids[1])[2],
            offline.offline_replicas
        );
        // Another cache state applying it uses the same ids, and reads what it was sent.
        let mut two = MetadataCache::default();
        put(&mut two, &[(&a, 5, entry(3, 0))]);
        apply(&mut two, &sent);
        assert!(std::ptr::eq(ids, stored.lists.get().unwrap()));
        assert_eq!(two.get("a", 1), Some(offline));
        assert_eq!(two.get("a", 5), Some(entry(3, 0)));
    }

    /// An entry of `leader` whose ISR and replicas are a list no other `n` makes.
    fn with_new_lists(leader: BrokerId, n: i32) -> UpdateMetadataEntry {
        UpdateMetadataEntry {
            isr: smallvec![leader, n],
            replicas: smallvec![leader, n, -n],
            ..entry(leader, 0)
        }
    }

    #[test]
    fn ever_new_lists_retire_the_table_and_the_cache_moves_to_a_bounded_one() {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut cache = MetadataCache::default();
        put(&mut cache, &[(&b, 0, entry(1, 0)), (&b, 70, entry(2, 0))]);
        let first = Arc::downgrade(&cache.contents.table);
        for n in 0..3 * RETIRE_FLOOR as i32 {
            put(&mut cache, &[(&a, n % 3, with_new_lists(1, n))]);
            let table = &cache.contents.table;
            assert!(table.len() <= 2 * RETIRE_FLOOR, "{} lists", table.len());
        }
        // The first table was retired, the cache moved out, and (no payload holding it) freed.
        assert!(first.upgrade().is_none());
        let mut expected = MetadataCache::default();
        let last = 3 * RETIRE_FLOOR as i32;
        put(
            &mut expected,
            &[(&b, 0, entry(1, 0)), (&b, 70, entry(2, 0))],
        );
        let entries: Vec<_> = (last - 3..last)
            .map(|n| (&a, n % 3, with_new_lists(1, n)))
            .collect();
        put(&mut expected, &entries);
        assert_eq!(contents(&cache), contents(&expected));
        assert_eq!(
            (cache.len(), cache.digest()),
            (expected.len(), expected.digest())
        );
    }

    #[test]
    fn caches_in_one_state_share_one_state_after_moving_out_of_a_retired_table() {
        let a: Arc<str> = "a".into();
        let mut first = MetadataCache::default();
        put(&mut first, &[(&a, 0, entry(1, 0)), (&a, 100, entry(2, 0))]);
        let mut second = MetadataCache {
            contents: first.contents.clone(),
        };
        let mut third = MetadataCache {
            contents: first.contents.clone(),
        };
        // A payload whose lists' ids are made in that table before it is retired.
        let early = payload(&[(&a, 2, entry(4, 2))]);
        apply(&mut MetadataCache::default(), &early);
        // Another cache's ever-new lists retire the table the three share.
        let mut other = MetadataCache::default();
        let mut n = 0;
        while !first.contents.table.is_retired() {
            put(&mut other, &[(&a, 1, with_new_lists(3, n))]);
            n += 1;
        }
        let change = payload(&[(&a, 1, entry(3, 1))]);
        apply(&mut first, &change);
        apply(&mut second, &change);
        assert!(first.shares_state_with(&second) && !first.contents.table.is_retired());
        assert_eq!(
            contents(&second),
            [
                ("a".to_string(), 0, entry(1, 0)),
                ("a".to_string(), 1, entry(3, 1)),
                ("a".to_string(), 100, entry(2, 0)),
            ]
        );
        // The third moves too on its next apply, to the state the others moved to, and follows
        // them from it.
        apply(&mut third, &change);
        assert!(third.shares_state_with(&first));
        // The early payload's ids are of the retired table: its lists are looked up again.
        apply(&mut first, &early);
        assert_eq!(first.get("a", 2), Some(entry(4, 2)));
        assert_eq!(first.get("a", 1), Some(entry(3, 1)));
    }

    #[test]
    fn a_chunk_is_copied_when_shared_and_compared_as_plain_data() {
        let a: Arc<str> = "a".into();
        let mut one = MetadataCache::default();
        put(&mut one, &[(&a, 0, entry(1, 0)), (&a, 1, entry(1, 0))]);
        let before = one.contents.clone();
        put(&mut one, &[(&a, 1, entry(2, 1))]);
        assert_eq!(
            before.topics[&a].get(1).map(|s| s.entry(&before.table)),
            Some(entry(1, 0))
        );
        assert!(!before.same(&one.contents));
        // The same states sent again by other payloads compare equal, slot for slot.
        let mut two = MetadataCache::default();
        put(&mut two, &[(&a, 1, entry(2, 1)), (&a, 0, entry(1, 0))]);
        assert!(two.contents.same(&one.contents));
    }

    #[test]
    fn chunks_of_a_state_no_cache_is_in_are_reused_for_copies() {
        let a: Arc<str> = "a".into();
        let mut one = MetadataCache::default();
        put(&mut one, &[(&a, 0, entry(1, 0))]);
        let two = MetadataCache {
            contents: one.contents.clone(),
        };
        put(&mut one, &[(&a, 0, entry(2, 1))]);
        let freed = Arc::as_ptr(&one.contents.topics[&a].chunks[0].clone().unwrap());
        drop(one);
        assert!(SPARE.with_borrow(|spare| spare.iter().any(|c| Arc::as_ptr(c) == freed)));
        let mut three = MetadataCache {
            contents: two.contents.clone(),
        };
        put(&mut three, &[(&a, 1, entry(1, 0))]);
        let copy = &three.contents.topics[&a].chunks[0];
        assert_eq!(copy.as_ref().map(Arc::as_ptr), Some(freed));
        assert_eq!(three.get("a", 0), Some(entry(1, 0)));
        assert_eq!(three.get("a", 1), Some(entry(1, 0)));
        assert_eq!(two.get("a", 1), None);
    }
}
