//! Controller-to-broker request batching (reference §5), mirroring
//! `kctl.reference.request_batch.ReferenceRequestBatch`: per-broker accumulation in insertion order,
//! sticky `is_new` and delete flags, the -2 sentinels for topics queued for deletion, and a flush in
//! Kafka's order (LeaderAndIsr, UpdateMetadata, StopReplica) to the brokers registered at send time.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use crate::hash::{HashMap, HashSet, IndexMap, IndexSet};

use crate::context::{Context, Part, Replicas};
use crate::metadata::ListIds;
use crate::model::{
    BrokerId, LeaderIsrAndControllerEpoch, LeaderRecoveryState, ReplicaAssignment,
    EPOCH_DURING_DELETE, LEADER_DURING_DELETE, NO_EPOCH,
};

/// A partition's state as one `add_leader_and_isr` call gives it to every recipient (shared by
/// their entries: a broker failure at a million partitions adds hundreds of thousands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrState {
    pub part: Part,
    pub controller_epoch: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Replicas,
    pub partition_epoch: i32,
    pub replicas: Replicas,
    /// AR and RR of a partition being reassigned, boxed: most are not, and a failover keeps a
    /// state per partition, 96 bytes with the `Arc`'s counts where the lists inline took 160
    /// (mimalloc's size class of their 136).
    pub reassignment: Option<Box<(Replicas, Replicas)>>,
    pub recovery: LeaderRecoveryState,
}

impl LeaderAndIsrState {
    /// The adding replicas (AR).
    pub fn adding(&self) -> &[BrokerId] {
        self.reassignment.as_ref().map_or(&[], |r| &r.0)
    }

    /// The removing replicas (RR).
    pub fn removing(&self) -> &[BrokerId] {
        self.reassignment.as_ref().map_or(&[], |r| &r.1)
    }
}

/// One broker's LeaderAndIsr entry for a partition: the shared state and the broker's own
/// (sticky) `is_new` flag. Reads the state's fields through `Deref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsrEntry {
    pub state: Arc<LeaderAndIsrState>,
    pub is_new: bool,
}

impl std::ops::Deref for LeaderAndIsrEntry {
    type Target = LeaderAndIsrState;

    fn deref(&self) -> &LeaderAndIsrState {
        &self.state
    }
}

/// One broker's LeaderAndIsr entries in the order their partitions were first added (adding one
/// again replaces its entry in place, with a sticky `is_new`): what a map from partition to entry
/// held, without a hash or key kept with each entry, and sent as it is where the map was copied
/// out. Entries appended as new (a failover's 3M at 1M partitions) are indexed only when
/// something looks one up.
#[derive(Debug, Default)]
pub struct LeaderAndIsrEntries {
    entries: Vec<LeaderAndIsrEntry>,
    /// Partition → position in `entries`, for the first `indexed` entries.
    at: HashMap<Part, u32>,
    indexed: usize,
}

impl LeaderAndIsrEntries {
    fn index(&mut self) {
        for (i, e) in self.entries.iter().enumerate().skip(self.indexed) {
            let at = u32::try_from(i).expect("fewer entries than u32::MAX");
            self.at.insert(e.part, at);
        }
        self.indexed = self.entries.len();
    }

    fn put(&mut self, state: &Arc<LeaderAndIsrState>, is_new: bool) {
        self.index();
        let fresh = u32::try_from(self.entries.len()).expect("fewer entries than u32::MAX");
        let at = *self.at.entry(state.part).or_insert(fresh);
        if at == fresh {
            self.entries.push(LeaderAndIsrEntry {
                state: state.clone(),
                is_new,
            });
            self.indexed = self.entries.len();
        } else {
            let old = &mut self.entries[at as usize];
            old.state = state.clone();
            old.is_new |= is_new;
        }
    }

    /// An entry (`is_new` false) for a partition that has none here, appended without a lookup.
    fn append_new(&mut self, state: Arc<LeaderAndIsrState>) {
        debug_assert!(self.get(state.part).is_none(), "{} added twice", state.part);
        self.entries.push(LeaderAndIsrEntry {
            state,
            is_new: false,
        });
    }

    pub fn get(&self, p: Part) -> Option<&LeaderAndIsrEntry> {
        match self.at.get(&p) {
            Some(at) => Some(&self.entries[*at as usize]),
            None => self.entries[self.indexed..].iter().find(|e| e.part == p),
        }
    }

    pub fn values(&self) -> std::slice::Iter<'_, LeaderAndIsrEntry> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMetadataEntry {
    pub part: Part,
    pub controller_epoch: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Replicas,
    pub partition_epoch: i32,
    pub replicas: Replicas,
    pub offline_replicas: Replicas,
}

/// The entries of one UpdateMetadata payload, immutable once sent (later changes never reach
/// them). A bulk payload (a new broker's: every partition with a leader, once per restart of a
/// rolling restart) shares with the previous bulk payload of its batch every entry that did not
/// change: its entries are read through `order` from chunks it shares with that payload, and only
/// the changed ones are stored anew. A simulated cluster keeps every request it sends (its
/// brokers' answers), so each restart stored the whole controller's view again: ~96 bytes a
/// partition of fresh memory, whose first touch cost the controller more than building it.
#[derive(Debug)]
pub struct UpdateMetadataEntries {
    /// The stored entries: a batch's segments (each [`SEGMENT`] long but the last, or one
    /// chunk), then, in a payload sharing them, the entries of later payloads that changed.
    chunks: Vec<Arc<StoredEntries>>,
    /// Where entry `i` is stored: its chunk and its index there (None: entry `i` of the
    /// segments, read without a table).
    order: Option<Vec<(u32, u32)>>,
    stored: usize,
}

/// A run of stored UpdateMetadata entries, and the ids of their broker lists in the brokers'
/// metadata caches (made when a cache first applies one of them: a bulk payload shares its
/// unchanged runs, ids included, with the previous one, so a cache applying it looks up only the
/// lists of the entries that changed).
#[derive(Debug)]
pub struct StoredEntries {
    pub entries: Vec<UpdateMetadataEntry>,
    pub lists: OnceLock<ListIds>,
}

impl StoredEntries {
    fn new(entries: Vec<UpdateMetadataEntry>) -> Self {
        Self {
            entries,
            lists: OnceLock::new(),
        }
    }
}

impl UpdateMetadataEntries {
    pub fn new(entries: Vec<UpdateMetadataEntry>) -> Self {
        Self::from_segments(vec![entries])
    }

    /// The entries of `segments`, concatenated: each [`SEGMENT`] long but the last (or just one).
    fn from_segments(segments: Vec<Vec<UpdateMetadataEntry>>) -> Self {
        debug_assert!(
            segments.len() < 2 || segments.iter().rev().skip(1).all(|s| s.len() == SEGMENT)
        );
        Self {
            stored: segments.iter().map(Vec::len).sum(),
            chunks: (segments.into_iter())
                .map(|s| Arc::new(StoredEntries::new(s)))
                .collect(),
            order: None,
        }
    }

    pub fn len(&self) -> usize {
        self.order.as_ref().map_or(self.stored, Vec::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many entries it stores, its own and those it shares.
    #[cfg(test)]
    fn stored(&self) -> usize {
        self.stored
    }

    /// The chunk and index where entry `i` is stored.
    fn locate(&self, i: usize) -> (usize, usize) {
        match &self.order {
            Some(order) => (order[i].0 as usize, order[i].1 as usize),
            None if self.chunks.len() == 1 => (0, i),
            None => (i / SEGMENT, i % SEGMENT),
        }
    }

    pub fn get(&self, i: usize) -> &UpdateMetadataEntry {
        let (stored, at) = self.stored_at(i);
        &stored.entries[at]
    }

    /// The stored run that holds entry `i`, and its index there.
    pub fn stored_at(&self, i: usize) -> (&StoredEntries, usize) {
        let (c, at) = self.locate(i);
        (&self.chunks[c], at)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &UpdateMetadataEntry> + Clone {
        (0..self.len()).map(|i| self.get(i))
    }
}

impl std::ops::Index<usize> for UpdateMetadataEntries {
    type Output = UpdateMetadataEntry;

    fn index(&self, i: usize) -> &UpdateMetadataEntry {
        self.get(i)
    }
}

impl PartialEq for UpdateMetadataEntries {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for UpdateMetadataEntries {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopReplicaEntry {
    pub part: Part,
    pub leader_epoch: i32,
    pub delete: bool,
}

/// The fields LeaderAndIsr and UpdateMetadata partition states start with (after the key):
/// controller epoch, leader, leader epoch, ISR, partition epoch, replicas.
pub type Head<'a> = (i32, i32, i32, &'a [i32], i32, &'a [i32]);

pub trait HasHead {
    fn head(&self) -> Head<'_>;
}

macro_rules! has_head {
    ($($entry:ty),*) => {$(
        impl HasHead for $entry {
            fn head(&self) -> Head<'_> {
                let e = self;
                (e.controller_epoch, e.leader, e.leader_epoch, &e.isr, e.partition_epoch, &e.replicas)
            }
        }
    )*};
}

has_head!(LeaderAndIsrEntry, UpdateMetadataEntry);

/// One request as sent (payloads are snapshots taken when the entries were added).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sent {
    LeaderAndIsr {
        broker: BrokerId,
        broker_epoch: i64,
        entries: Vec<LeaderAndIsrEntry>,
        live_leaders: Vec<BrokerId>,
    },
    /// One payload for every recipient (registered, ascending), each sent its own broker epoch:
    /// a fan-out is one item, not one per broker (~100 per partition change in a large cluster).
    UpdateMetadata {
        brokers: Vec<BrokerId>,
        entries: Arc<UpdateMetadataEntries>,
    },
    StopReplica {
        broker: BrokerId,
        broker_epoch: i64,
        delete_partitions: bool,
        entries: Vec<StopReplicaEntry>,
    },
}

/// A partition's LeaderAndIsr state, to share among its recipients.
fn leader_and_isr_state(
    p: Part,
    lice: &LeaderIsrAndControllerEpoch,
    (replicas, adding, removing): (&[BrokerId], &[BrokerId], &[BrokerId]),
) -> Arc<LeaderAndIsrState> {
    let lai = &lice.leader_and_isr;
    Arc::new(LeaderAndIsrState {
        part: p,
        controller_epoch: lice.controller_epoch,
        leader: lai.leader,
        leader_epoch: lai.leader_epoch,
        isr: Replicas::from_slice(&lai.isr),
        partition_epoch: lai.partition_epoch,
        replicas: Replicas::from_slice(replicas),
        reassignment: (!adding.is_empty() || !removing.is_empty())
            .then(|| Box::new((Replicas::from_slice(adding), Replicas::from_slice(removing)))),
        recovery: lai.recovery,
    })
}

/// The brokers of a recipient list that get requests, each once (the -1 of "no broker" gets none).
fn distinct_recipients(brokers: &[BrokerId]) -> impl Iterator<Item = &BrokerId> {
    brokers
        .iter()
        .enumerate()
        .filter(|(k, b)| **b >= 0 && !brokers[..*k].contains(*b))
        .map(|(_, b)| b)
}

/// Add `p` to a broker's StopReplica request, replaced in place with a sticky `delete`.
fn put_stop_replica(
    ctx: &Context,
    states: &mut IndexMap<Part, StopReplicaEntry>,
    p: Part,
    delete: bool,
) {
    let leader_epoch = if ctx.is_topic_idx_queued_up_for_deletion(ctx.partition_topic(p)) {
        EPOCH_DURING_DELETE
    } else if ctx.has_leadership(p) {
        ctx.leader_epoch(p)
    } else {
        NO_EPOCH
    };
    states
        .entry(p)
        .and_modify(|old| {
            old.leader_epoch = leader_epoch;
            old.delete |= delete;
        })
        .or_insert(StopReplicaEntry {
            part: p,
            leader_epoch,
            delete,
        });
}

/// Entries per segment of a batch's UpdateMetadata entries (96 KB).
const SEGMENT: usize = 1024;

/// A batch's UpdateMetadata entries, in segments of [`SEGMENT`] (the first grows as a vector
/// does): a new broker's 100K entries are built in allocations the allocator hands out again
/// warm, where one 9.6 MB vector took fresh pages at each restart of a rolling restart.
///
/// Sharing with a base (the last bulk payload), an entry equal to the base's at its position is
/// not stored: only where it is, and the segments hold the others. A new broker's payload then
/// writes only the entries a restart changed, and is compared as it is built, not after.
#[derive(Debug, Default)]
struct Segmented {
    segments: Vec<Vec<UpdateMetadataEntry>>,
    /// Entries in the batch (at positions `0..len`).
    len: usize,
    /// Entries stored in `segments`.
    stored: usize,
    shared: Option<SharedOrder>,
}

/// Where each entry of a [`Segmented`] sharing with `base` is: a chunk of `base`, or (from
/// `base.chunks.len()` on) a segment of its own, and the index there.
#[derive(Debug)]
struct SharedOrder {
    base: Arc<UpdateMetadataEntries>,
    order: Vec<(u32, u32)>,
}

impl SharedOrder {
    /// The chunk and index of `base`'s entry at position `i`, if it equals `e`.
    fn base_equal(&self, i: usize, e: &UpdateMetadataEntry) -> Option<(u32, u32)> {
        let base = &self.base;
        if i >= base.len() {
            return None;
        }
        let (c, at) = base.locate(i);
        (base.chunks[c].entries[at] == *e).then_some((c as u32, at as u32))
    }
}

impl Segmented {
    /// Entries to share with `base` what equals its own at the same position (a payload of the
    /// same partitions, most of them unchanged); None when `base` already stores more than twice
    /// `n` entries (it shared with too many payloads before) or positions would not fit a `u32`.
    fn sharing(base: Arc<UpdateMetadataEntries>, n: usize) -> Option<Self> {
        if base.stored > 2 * n || u32::try_from(base.chunks.len().max(n) + n / SEGMENT + 1).is_err()
        {
            return None;
        }
        Some(Self {
            shared: Some(SharedOrder {
                base,
                order: Vec::with_capacity(n),
            }),
            ..Self::default()
        })
    }

    /// Store `e` in the segments: its segment and index.
    fn store(&mut self, e: UpdateMetadataEntry) -> (usize, usize) {
        match self.segments.last_mut() {
            Some(last) if last.len() < SEGMENT => last.push(e),
            _ => {
                let mut segment = Vec::with_capacity(if self.stored == 0 { 1 } else { SEGMENT });
                segment.push(e);
                self.segments.push(segment);
            }
        }
        self.stored += 1;
        (
            self.segments.len() - 1,
            self.segments.last().map_or(0, Vec::len) - 1,
        )
    }

    fn push(&mut self, e: UpdateMetadataEntry) {
        let at = match &self.shared {
            Some(shared) => shared.base_equal(self.len, &e),
            None => None,
        };
        let at = at.unwrap_or_else(|| {
            let (segment, i) = self.store(e);
            (self.own_chunk(segment), i as u32)
        });
        if let Some(shared) = &mut self.shared {
            shared.order.push(at);
        }
        self.len += 1;
    }

    /// The chunk index of segment `segment` in the payload the entries become.
    fn own_chunk(&self, segment: usize) -> u32 {
        let base = self.shared.as_ref().map_or(0, |s| s.base.chunks.len());
        (base + segment) as u32
    }

    fn set(&mut self, i: usize, e: UpdateMetadataEntry) {
        let Some(shared) = &self.shared else {
            self.segments[i / SEGMENT][i % SEGMENT] = e;
            return;
        };
        let own = shared.base.chunks.len();
        let at = match shared.base_equal(i, &e) {
            Some(at) => at,
            None => match shared.order[i] {
                (c, at) if c as usize >= own => {
                    self.segments[c as usize - own][at as usize] = e;
                    return;
                }
                _ => {
                    let (segment, at) = self.store(e);
                    (self.own_chunk(segment), at as u32)
                }
            },
        };
        if let Some(shared) = &mut self.shared {
            shared.order[i] = at;
        }
    }

    /// Room for `n` more entries in the first segment (the others are allocated whole); a sharing
    /// one makes room in its order only (its segments hold the few entries that changed).
    fn reserve(&mut self, n: usize) {
        if let Some(shared) = &mut self.shared {
            shared.order.reserve(n);
        } else if self.segments.is_empty() {
            self.segments.push(Vec::with_capacity(n.min(SEGMENT)));
        } else if self.segments.len() == 1 {
            let first = &mut self.segments[0];
            first.reserve(n.min(SEGMENT - first.len()));
        }
    }

    fn get(&self, i: usize) -> &UpdateMetadataEntry {
        match &self.shared {
            Some(shared) => {
                let (c, at) = shared.order[i];
                let own = shared.base.chunks.len();
                match (c as usize).checked_sub(own) {
                    Some(segment) => &self.segments[segment][at as usize],
                    None => &shared.base.chunks[c as usize].entries[at as usize],
                }
            }
            None => &self.segments[i / SEGMENT][i % SEGMENT],
        }
    }

    fn iter(&self) -> impl Iterator<Item = &UpdateMetadataEntry> {
        (0..self.len).map(|i| self.get(i))
    }

    /// The payload of the entries (sharing its base's chunks, if it shares).
    fn into_entries(self) -> UpdateMetadataEntries {
        let Some(SharedOrder { base, order }) = self.shared else {
            return UpdateMetadataEntries::from_segments(self.segments);
        };
        let mut chunks = base.chunks.clone();
        chunks.extend(
            self.segments
                .into_iter()
                .map(|s| Arc::new(StoredEntries::new(s))),
        );
        UpdateMetadataEntries {
            chunks,
            order: Some(order),
            stored: base.stored + self.stored,
        }
    }
}

#[derive(Debug, Default)]
pub struct RequestBatch {
    leader_and_isr: BTreeMap<BrokerId, LeaderAndIsrEntries>,
    stop_replica: BTreeMap<BrokerId, IndexMap<Part, StopReplicaEntry>>,
    update_metadata_brokers: IndexSet<BrokerId>,
    /// The UpdateMetadata entries in the order their partitions were first added (adding one again
    /// replaces its entry in place): sent as they are, where a map of them was copied out at send.
    update_metadata_parts: Segmented,
    /// By partition index, 1 + the position of its entry in `update_metadata_parts` (0: none): a
    /// membership test and lookup that stays in cache where a million-entry map's would not.
    update_metadata_at: Vec<u32>,
    /// The states `add_leader_and_isr_unchanged` made, by partition index, to share.
    unchanged_states: Vec<Option<Arc<LeaderAndIsrState>>>,
    /// The context's live generation whose brokers are all in `update_metadata_brokers` already
    /// (adding a partition for every registered broker is then no per-broker work).
    update_metadata_generation: Option<u64>,
    /// The last bulk UpdateMetadata payload sent, while anything holds it: the next shares its
    /// unchanged entries (see [`UpdateMetadataEntries`]).
    last_bulk: std::sync::Weak<UpdateMetadataEntries>,
}

impl RequestBatch {
    /// The error of `newBatch()` on a batch that was not sent (reference §5.3), if any.
    pub fn check_empty(&self) -> Result<(), String> {
        let pending: [(&str, Vec<BrokerId>); 3] = [
            (
                "LeaderAndIsr",
                self.leader_and_isr.keys().copied().collect(),
            ),
            ("StopReplica", self.stop_replica.keys().copied().collect()),
            ("UpdateMetadata", {
                let mut b: Vec<BrokerId> = self.update_metadata_brokers.iter().copied().collect();
                b.sort_unstable();
                b
            }),
        ];
        for (name, brokers) in pending {
            if !brokers.is_empty() {
                return Err(format!(
                    "Controller to broker state change requests batch is not empty while creating a new one. Some {name} state changes to brokers [{}] might be lost",
                    brokers.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        Ok(())
    }

    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Make room for the UpdateMetadata entries of a bulk state change of `partitions` (each adds
    /// at most one), so that the first segment is not grown and copied step by step.
    pub fn reserve(&mut self, partitions: usize) {
        self.update_metadata_parts.reserve(partitions);
    }

    pub fn add_leader_and_isr(
        &mut self,
        ctx: &Context,
        brokers: &[BrokerId],
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        assignment: &ReplicaAssignment,
        is_new: bool,
    ) {
        let lists = (
            &assignment.replicas[..],
            &assignment.adding[..],
            &assignment.removing[..],
        );
        self.add_leader_and_isr_state(ctx, brokers, p, lice, lists, is_new);
    }

    /// [`Self::add_leader_and_isr`] with the partition's assignment as the context has it (read
    /// in place, not copied into a `ReplicaAssignment` first).
    pub fn add_leader_and_isr_assigned(
        &mut self,
        ctx: &Context,
        brokers: &[BrokerId],
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        is_new: bool,
    ) {
        let (adding, removing) = ctx.reassignment_lists(p);
        self.add_leader_and_isr_state(
            ctx,
            brokers,
            p,
            lice,
            (ctx.replicas(p), adding, removing),
            is_new,
        );
    }

    /// [`Self::add_leader_and_isr_assigned`] with the context's cached leadership (nothing when
    /// there is none), for a caller that knows nothing a partition's LeaderAndIsr state or
    /// UpdateMetadata entry reads (leadership, replicas, brokers, deletions) changed since this
    /// batch last made them through this method: they would come out the same, so the state is
    /// shared and the entry stands. A failover adds every partition once per replica, so this
    /// makes one state and one entry where it made three of each.
    /// `parts`: distinct partitions that `broker`'s request has no entry for yet, appended
    /// without a lookup each (a failover's 3M; the first lookup after indexes them).
    pub fn add_leader_and_isr_unchanged(
        &mut self,
        ctx: &Context,
        broker: BrokerId,
        parts: &[Part],
    ) {
        let mut entries = self.leader_and_isr.remove(&broker).unwrap_or_default();
        entries.entries.reserve(parts.len());
        for &p in parts {
            let Some(state) = self.unchanged_state(ctx, p) else {
                continue;
            };
            if broker >= 0 {
                entries.append_new(state);
            }
            self.register_update_metadata_brokers(ctx);
            if !self.has_update_metadata(p) {
                self.add_update_metadata(ctx, &[], &[p]);
            }
        }
        if !entries.is_empty() {
            self.leader_and_isr.insert(broker, entries);
        }
    }

    /// The state [`Self::add_leader_and_isr_unchanged`] made for `p` in this batch, made now if
    /// it made none yet (None without cached leadership).
    fn unchanged_state(&mut self, ctx: &Context, p: Part) -> Option<Arc<LeaderAndIsrState>> {
        let i = p as usize;
        if let Some(Some(state)) = self.unchanged_states.get(i) {
            return Some(state.clone());
        }
        let lice = ctx.leadership(p)?;
        let (adding, removing) = ctx.reassignment_lists(p);
        let state = leader_and_isr_state(p, &lice, (ctx.replicas(p), adding, removing));
        if self.unchanged_states.len() <= i {
            self.unchanged_states
                .resize(ctx.partition_count().max(i + 1), None);
        }
        self.unchanged_states[i] = Some(state.clone());
        Some(state)
    }

    fn add_leader_and_isr_state(
        &mut self,
        ctx: &Context,
        brokers: &[BrokerId],
        p: Part,
        lice: &LeaderIsrAndControllerEpoch,
        lists: (&[BrokerId], &[BrokerId], &[BrokerId]),
        is_new: bool,
    ) {
        let state = leader_and_isr_state(p, lice, lists);
        self.put_leader_and_isr_entry(brokers, &state, is_new);
        self.add_update_metadata_for_registered(ctx, &[p]);
    }

    /// [`Self::add_leader_and_isr_assigned`] (`is_new` false) of a run of distinct partitions,
    /// each with its recipients and its leadership as the context caches it (which the run does
    /// not change): each recipient's request is taken out of the map once and grown once, and one
    /// that had no entries before gets them appended without a lookup each (a broker failure at
    /// 1M partitions adds 60K entries to 99 requests).
    pub fn add_leader_and_isr_run<B: AsRef<[BrokerId]>>(
        &mut self,
        ctx: &Context,
        run: &[(Part, B, LeaderIsrAndControllerEpoch)],
    ) {
        if run.is_empty() {
            return; // no UpdateMetadata brokers either
        }
        // Each recipient's request, whether it was empty, and how many entries the run adds to it.
        let mut open: Vec<(BrokerId, LeaderAndIsrEntries, bool, usize)> = Vec::new();
        let mut slot_of: HashMap<BrokerId, usize> = HashMap::default();
        for (_, to, _) in run {
            for &b in distinct_recipients(to.as_ref()) {
                let slot = *slot_of.entry(b).or_insert_with(|| {
                    let entries = self.leader_and_isr.remove(&b).unwrap_or_default();
                    let empty = entries.is_empty();
                    open.push((b, entries, empty, 0));
                    open.len() - 1
                });
                open[slot].3 += 1;
            }
        }
        for (_, entries, _, adding) in &mut open {
            entries.entries.reserve(*adding);
        }
        for (p, to, lice) in run {
            let (adding, removing) = ctx.reassignment_lists(*p);
            let state = leader_and_isr_state(*p, lice, (ctx.replicas(*p), adding, removing));
            for b in distinct_recipients(to.as_ref()) {
                let (_, entries, was_empty, _) = &mut open[slot_of[b]];
                if *was_empty {
                    entries.append_new(state.clone());
                } else {
                    entries.put(&state, false);
                }
            }
        }
        for (b, entries, _, _) in open {
            self.leader_and_isr.insert(b, entries);
        }
        self.register_update_metadata_brokers(ctx);
        for (p, _, lice) in run {
            self.put_update_metadata(ctx, *p, lice);
        }
    }

    fn put_leader_and_isr_entry(
        &mut self,
        brokers: &[BrokerId],
        state: &Arc<LeaderAndIsrState>,
        is_new: bool,
    ) {
        for broker in brokers.iter().copied().filter(|b| *b >= 0) {
            self.leader_and_isr
                .entry(broker)
                .or_default()
                .put(state, is_new);
        }
    }

    /// `add_update_metadata` for every live or shutting-down broker.
    pub fn add_update_metadata_for_registered(&mut self, ctx: &Context, parts: &[Part]) {
        self.register_update_metadata_brokers(ctx);
        self.add_update_metadata(ctx, &[], parts);
    }

    fn register_update_metadata_brokers(&mut self, ctx: &Context) {
        if self.update_metadata_generation != Some(ctx.live_generation()) {
            self.update_metadata_brokers
                .extend(ctx.registered_broker_ids().filter(|b| *b >= 0));
            self.update_metadata_generation = Some(ctx.live_generation());
        }
    }

    fn has_update_metadata(&self, p: Part) -> bool {
        self.update_metadata_at
            .get(p as usize)
            .is_some_and(|at| *at != 0)
    }

    /// The UpdateMetadata entries, leaving none. The positions of a bulk batch are released; a
    /// small batch's are reset one by one and kept (a broker failure's next batch would otherwise
    /// zero a position per partition again).
    fn take_update_metadata_parts(&mut self) -> Segmented {
        let parts = std::mem::take(&mut self.update_metadata_parts);
        if parts.len >= self.update_metadata_at.len() / 16 {
            self.update_metadata_at = Vec::new();
        } else {
            for e in parts.iter() {
                self.update_metadata_at[e.part as usize] = 0;
            }
        }
        parts
    }

    /// Whether `n` entries are a bulk payload's: at least half the partitions.
    fn is_bulk(ctx: &Context, n: usize) -> bool {
        n != 0 && n * 2 >= ctx.partition_count()
    }

    /// The payload of `parts`: a bulk one shares what did not change with the last bulk payload,
    /// if anything still holds that (entries added in bulk already do, see `add_update_metadata`).
    fn shared_entries(&mut self, ctx: &Context, parts: Segmented) -> Arc<UpdateMetadataEntries> {
        if !Self::is_bulk(ctx, parts.len) {
            if parts.shared.is_none() {
                return Arc::new(parts.into_entries());
            }
            let mut plain = Segmented::default();
            parts.iter().cloned().for_each(|e| plain.push(e));
            return Arc::new(plain.into_entries());
        }
        let base = self.last_bulk.upgrade().filter(|_| parts.shared.is_none());
        let entries = Arc::new(match base.and_then(|b| Segmented::sharing(b, parts.len)) {
            Some(mut sharing) => {
                parts
                    .segments
                    .into_iter()
                    .flatten()
                    .for_each(|e| sharing.push(e));
                sharing.into_entries()
            }
            None => parts.into_entries(),
        });
        self.last_bulk = Arc::downgrade(&entries);
        entries
    }

    pub fn add_update_metadata(&mut self, ctx: &Context, brokers: &[BrokerId], parts: &[Part]) {
        self.update_metadata_brokers
            .extend(brokers.iter().copied().filter(|b| *b >= 0));
        if self.update_metadata_parts.len == 0 && Self::is_bulk(ctx, parts.len()) {
            // A new broker's payload: shared with the last one as it is built.
            if let Some(sharing) = self
                .last_bulk
                .upgrade()
                .and_then(|base| Segmented::sharing(base, parts.len()))
            {
                self.update_metadata_parts = sharing;
            }
        }
        self.update_metadata_parts.reserve(parts.len());
        for &p in parts {
            if let Some(lice) = ctx.leadership(p) {
                self.put_update_metadata(ctx, p, &lice);
            }
        }
    }

    /// The UpdateMetadata entry of `p`, whose cached leadership is `lice`.
    fn put_update_metadata(&mut self, ctx: &Context, p: Part, lice: &LeaderIsrAndControllerEpoch) {
        let lai = &lice.leader_and_isr;
        let replicas = ctx.replicas(p);
        // Lists copied as slices: a new broker's payload has an entry per partition, and
        // SmallVec's clone, `From<&[T]>` and `collect` go element by element.
        let mut offline = Replicas::new();
        for &r in replicas {
            if !ctx.is_replica_online(r, p, false) {
                offline.push(r);
            }
        }
        let (leader, leader_epoch, version) =
            if ctx.is_topic_idx_queued_up_for_deletion(ctx.partition_topic(p)) {
                (LEADER_DURING_DELETE, 0, 0)
            } else {
                (lai.leader, lai.leader_epoch, lai.partition_epoch)
            };
        let entry = UpdateMetadataEntry {
            part: p,
            controller_epoch: lice.controller_epoch,
            leader,
            leader_epoch,
            isr: Replicas::from_slice(&lai.isr),
            partition_epoch: version,
            replicas: Replicas::from_slice(replicas),
            offline_replicas: offline,
        };
        let i = p as usize;
        if self.update_metadata_at.len() <= i {
            self.update_metadata_at
                .resize(ctx.partition_count().max(i + 1), 0);
        }
        match self.update_metadata_at[i] {
            0 => {
                self.update_metadata_parts.push(entry);
                self.update_metadata_at[i] = u32::try_from(self.update_metadata_parts.len)
                    .expect("fewer UpdateMetadata entries than partition indices");
            }
            at => self.update_metadata_parts.set(at as usize - 1, entry),
        }
    }

    pub fn add_stop_replica(&mut self, ctx: &Context, brokers: &[BrokerId], p: Part, delete: bool) {
        for broker in brokers.iter().copied().filter(|b| *b >= 0) {
            put_stop_replica(ctx, self.stop_replica.entry(broker).or_default(), p, delete);
        }
    }

    /// [`Self::add_stop_replica`] of many partitions for one broker, its request looked up and
    /// grown once (a broker failure stops each of the broker's replicas).
    pub fn add_stop_replicas(
        &mut self,
        ctx: &Context,
        broker: BrokerId,
        parts: &[Part],
        delete: bool,
    ) {
        if broker < 0 || parts.is_empty() {
            return;
        }
        let states = self.stop_replica.entry(broker).or_default();
        states.reserve(parts.len());
        for &p in parts {
            put_stop_replica(ctx, states, p, delete);
        }
    }

    pub fn pending_leader_and_isr(&self) -> &BTreeMap<BrokerId, LeaderAndIsrEntries> {
        &self.leader_and_isr
    }

    pub fn pending_stop_replica(&self) -> &BTreeMap<BrokerId, IndexMap<Part, StopReplicaEntry>> {
        &self.stop_replica
    }

    pub fn pending_update_metadata(&self) -> (Vec<BrokerId>, Vec<&UpdateMetadataEntry>) {
        (
            self.update_metadata_brokers.iter().copied().collect(),
            self.update_metadata_parts.iter().collect(),
        )
    }

    /// Flush to the brokers registered now; `log` receives Kafka's INFO lines in order.
    pub fn send(
        &mut self,
        ctx: &Context,
        stop_replica_version: i32,
        log: &mut dyn FnMut(String),
    ) -> Vec<Sent> {
        let mut sent = Vec::new();
        let epoch = |b: BrokerId| ctx.live_broker_epoch(b).unwrap_or(-1);

        for (broker, states) in std::mem::take(&mut self.leader_and_isr) {
            if !ctx.is_registered(broker) {
                continue;
            }
            let leaders = states.values().filter(|s| s.leader == broker).count();
            log(format!(
                "Sending LeaderAndIsr request to broker {broker} with {leaders} become-leader and {} become-follower partitions",
                states.len() - leaders
            ));
            // Distinct first (a few brokers lead a failover's 30K entries per request).
            let mut distinct = HashSet::default();
            let mut live_leaders: Vec<BrokerId> = states
                .values()
                .map(|s| s.leader)
                .filter(|b| distinct.insert(*b))
                .collect();
            live_leaders.sort_unstable();
            live_leaders.retain(|b| ctx.is_registered(*b));
            sent.push(Sent::LeaderAndIsr {
                broker,
                broker_epoch: epoch(broker),
                entries: states.entries,
                live_leaders,
            });
        }

        if self.update_metadata_brokers.is_empty() {
            self.take_update_metadata_parts();
        } else {
            let mut requested: Vec<BrokerId> =
                self.update_metadata_brokers.iter().copied().collect();
            requested.sort_unstable();
            log(format!(
                "Sending UpdateMetadata request to brokers [{}] for {} partitions",
                requested
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                self.update_metadata_parts.len
            ));
            let parts = self.take_update_metadata_parts();
            let entries = self.shared_entries(ctx, parts);
            requested.retain(|b| ctx.is_registered(*b));
            if !requested.is_empty() {
                sent.push(Sent::UpdateMetadata {
                    brokers: requested,
                    entries,
                });
            }
            self.update_metadata_brokers.clear();
        }
        self.update_metadata_generation = None;
        self.unchanged_states = Vec::new(); // 8 bytes a partition, released before the requests leave

        for (broker, states) in std::mem::take(&mut self.stop_replica) {
            if !ctx.is_registered(broker) {
                continue;
            }
            if stop_replica_version >= 3 {
                // Grouped by topic, topics in order of first appearance.
                let mut by_topic: IndexMap<u32, Vec<StopReplicaEntry>> = IndexMap::default();
                for s in states.values() {
                    by_topic
                        .entry(ctx.partition_topic(s.part))
                        .or_default()
                        .push(*s);
                }
                log(format!(
                    "Sending StopReplica request for {} replicas to broker {broker}",
                    states.len()
                ));
                sent.push(Sent::StopReplica {
                    broker,
                    broker_epoch: epoch(broker),
                    delete_partitions: false,
                    entries: by_topic.into_values().flatten().collect(),
                });
                continue;
            }
            let (to_delete, to_stop): (Vec<StopReplicaEntry>, Vec<StopReplicaEntry>) =
                states.values().copied().partition(|s| s.delete);
            if !to_delete.is_empty() {
                log(format!(
                    "Sending StopReplica request (delete = true) for {} replicas to broker {broker}",
                    to_delete.len()
                ));
                sent.push(Sent::StopReplica {
                    broker,
                    broker_epoch: epoch(broker),
                    delete_partitions: true,
                    entries: to_delete,
                });
            }
            if !to_stop.is_empty() {
                log(format!(
                    "Sending StopReplica request (delete = false) for {} replicas to broker {broker}",
                    to_stop.len()
                ));
                sent.push(Sent::StopReplica {
                    broker,
                    broker_epoch: epoch(broker),
                    delete_partitions: false,
                    entries: to_stop,
                });
            }
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LeaderAndIsr;

    /// Assign `p` to `replicas`, all in its ISR, led by `leader` at `leader_epoch`.
    fn assign_and_lead(
        ctx: &mut Context,
        p: Part,
        replicas: &[BrokerId],
        leader: BrokerId,
        leader_epoch: i32,
    ) {
        let mut lai = LeaderAndIsr::new(leader, replicas.into());
        lai.leader_epoch = leader_epoch;
        let assignment = ReplicaAssignment {
            replicas: replicas.into(),
            ..Default::default()
        };
        ctx.update_assignment(p, &assignment);
        let lice = LeaderIsrAndControllerEpoch {
            leader_and_isr: lai,
            controller_epoch: 1,
        };
        ctx.put_leadership(p, &lice);
    }

    #[test]
    fn update_metadata_for_registered_brokers_follows_the_live_set_across_sends() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        let p = ctx.intern_part("t", 0);
        ctx.put_leadership(
            p,
            &LeaderIsrAndControllerEpoch {
                leader_and_isr: LeaderAndIsr::new(1, smallvec::smallvec![1]),
                controller_epoch: 1,
            },
        );
        let mut batch = RequestBatch::default();
        let recipients = |sent: &[Sent]| -> Vec<BrokerId> {
            sent.iter()
                .flat_map(|s| match s {
                    Sent::UpdateMetadata { brokers, .. } => brokers.clone(),
                    _ => Vec::new(),
                })
                .collect()
        };
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        assert_eq!(recipients(&batch.send(&ctx, 3, &mut |_| {})), vec![1, 2]);
        // The same live set after a send: the brokers must be added again.
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        assert_eq!(recipients(&batch.send(&ctx, 3, &mut |_| {})), vec![1, 2]);
        // A broker joins between two additions to one batch: it gets the request too.
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        ctx.add_live_brokers(&[(3, 30)]);
        batch.add_update_metadata_for_registered(&ctx, &[p]);
        assert_eq!(recipients(&batch.send(&ctx, 3, &mut |_| {})), vec![1, 2, 3]);
    }

    #[test]
    fn a_bulk_update_metadata_shares_what_did_not_change_and_keeps_what_it_was_sent() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        // Over two segments of a batch's entries.
        let parts: Vec<Part> = (0..2500).map(|i| ctx.intern_part("t", i)).collect();
        let lead = |ctx: &mut Context, p: Part, leader: BrokerId, leader_epoch: i32| {
            assign_and_lead(ctx, p, &[1, 2], leader, leader_epoch);
        };
        for &p in &parts {
            lead(&mut ctx, p, 1, 0);
        }
        // A new broker's UpdateMetadata (every partition), as the controller sends it at start-up.
        let mut batch = RequestBatch::default();
        let full = |batch: &mut RequestBatch, ctx: &Context| {
            batch.add_update_metadata(ctx, &[2], &parts);
            let sent = batch.send(ctx, 3, &mut |_| {});
            let [Sent::UpdateMetadata { entries, .. }] = &sent[..] else {
                panic!("one UpdateMetadata request")
            };
            // What a batch that never shared would have sent (a fresh batch).
            let mut alone = RequestBatch::default();
            alone.add_update_metadata(ctx, &[2], &parts);
            let [Sent::UpdateMetadata { entries: plain, .. }] =
                &alone.send(ctx, 3, &mut |_| {})[..]
            else {
                panic!("one UpdateMetadata request")
            };
            assert_eq!(**entries, **plain);
            assert!(entries.iter().eq(plain.iter()), "entry for entry");
            let copy: Vec<UpdateMetadataEntry> = entries.iter().cloned().collect();
            (entries.clone(), copy)
        };
        let (first, first_sent) = full(&mut batch, &ctx);
        lead(&mut ctx, parts[7], 2, 1);
        lead(&mut ctx, parts[2100], 2, 1);
        let (second, _) = full(&mut batch, &ctx);
        // Later changes never reach a payload sent before them.
        assert!(first.iter().eq(first_sent.iter()));
        assert_eq!((first[7].leader, second[7].leader), (1, 2));
        // The second stores only the two entries that changed.
        assert_eq!(second.stored(), first.stored() + 2);
        assert!(std::ptr::eq(first.get(8), second.get(8)));
        assert!(!std::ptr::eq(first.get(7), second.get(7)));
        // A third after another change shares with the second, and still reads as sent.
        lead(&mut ctx, parts[7], 1, 2);
        let (third, _) = full(&mut batch, &ctx);
        assert_eq!((third[7].leader, third[7].leader_epoch), (1, 2));
        assert_eq!((second[7].leader, second[7].leader_epoch), (2, 1));
        assert!(first.iter().eq(first_sent.iter()));
        {
            // Added again within the batch after a change: replaced in place, in a later segment.
            batch.add_update_metadata(&ctx, &[2], &parts);
            lead(&mut ctx, parts[2100], 2, 5);
            batch.add_update_metadata(&ctx, &[2], &parts[2100..2101]);
            let sent = batch.send(&ctx, 3, &mut |_| {});
            let [Sent::UpdateMetadata { entries, .. }] = &sent[..] else {
                panic!("one UpdateMetadata request")
            };
            assert_eq!(entries.len(), parts.len());
            assert_eq!(
                (entries[2100].part, entries[2100].leader_epoch),
                (parts[2100], 5)
            );
            assert_eq!((third[2100].leader_epoch, third.stored()), (1, 2503));
        }
        // Once nothing holds the last bulk payload, the next is stored whole.
        drop((first, second, third));
        let (fourth, _) = full(&mut batch, &ctx);
        assert_eq!(fourth.stored(), parts.len());
        // A payload whose base stores more than twice its entries is stored afresh.
        let mut held = vec![fourth];
        for round in 0..6 {
            for &p in &parts[..1000] {
                lead(&mut ctx, p, 1 + round % 2, 3 + round);
            }
            held.push(full(&mut batch, &ctx).0);
        }
        let stored: Vec<usize> = held.iter().map(|e| e.stored()).collect();
        assert_eq!(stored, [2500, 3500, 4500, 5500, 2500, 3500, 4500]);
    }

    #[test]
    fn a_payload_added_in_bulk_stores_only_what_changed_as_it_is_built() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        let parts: Vec<Part> = (0..2500).map(|i| ctx.intern_part("t", i)).collect();
        for &p in &parts {
            assign_and_lead(&mut ctx, p, &[1, 2], 1, 0);
        }
        let mut batch = RequestBatch::default();
        let send = |batch: &mut RequestBatch, ctx: &Context| {
            let [Sent::UpdateMetadata { entries, .. }] = &batch.send(ctx, 3, &mut |_| {})[..]
            else {
                panic!("one UpdateMetadata request")
            };
            entries.clone()
        };
        batch.add_update_metadata(&ctx, &[2], &parts);
        let first = send(&mut batch, &ctx);
        assign_and_lead(&mut ctx, parts[7], &[1, 2], 2, 1);
        assign_and_lead(&mut ctx, parts[2100], &[1, 2], 2, 1);
        batch.add_update_metadata(&ctx, &[2], &parts);
        assert_eq!(
            batch.update_metadata_parts.stored, 2,
            "only the changed entries"
        );
        // Added again: one changed back reads as the base's, one changed again in its own place.
        assign_and_lead(&mut ctx, parts[7], &[1, 2], 1, 0);
        assign_and_lead(&mut ctx, parts[2100], &[1, 2], 2, 2);
        batch.add_update_metadata(&ctx, &[2], &[parts[7], parts[2100]]);
        assert_eq!(batch.update_metadata_parts.stored, 2);
        let second = send(&mut batch, &ctx);
        let mut alone = RequestBatch::default();
        alone.add_update_metadata(&ctx, &[2], &parts);
        assert_eq!(
            *second,
            *send(&mut alone, &ctx),
            "as a batch of its own sends them"
        );
        assert!(std::ptr::eq(first.get(7), second.get(7)));
        assert_eq!((second[2100].leader, second[2100].leader_epoch), (2, 2));
        assert_eq!(second.stored(), first.stored() + 2);
    }

    #[test]
    fn a_partition_state_is_small_without_a_reassignment() {
        // A failover keeps one per partition, behind an `Arc` (mimalloc's 96-byte class).
        assert!(std::mem::size_of::<LeaderAndIsrState>() <= 80);
    }

    #[test]
    fn entries_added_again_keep_their_place_within_a_batch_only() {
        for partitions in [2, 100] {
            // 100: a batch with few entries resets their positions instead of releasing them all.
            let mut ctx = Context::new();
            ctx.set_live_brokers(&[(1, 10)]);
            let parts: Vec<Part> = (0..partitions).map(|i| ctx.intern_part("t", i)).collect();
            let led = |ctx: &mut Context, p: Part, leader_epoch: i32| {
                assign_and_lead(ctx, p, &[1], 1, leader_epoch);
            };
            for &p in &parts {
                led(&mut ctx, p, 0);
            }
            let (a, b) = (parts[0], parts[1]);
            let mut batch = RequestBatch::default();
            let sent_order = |batch: &mut RequestBatch, ctx: &Context| -> [Vec<(Part, i32)>; 2] {
                // (partition, leader epoch) of the LeaderAndIsr request, then of the UpdateMetadata.
                batch
                    .send(ctx, 3, &mut |_| {})
                    .iter()
                    .filter_map(|s| match s {
                        Sent::LeaderAndIsr { entries, .. } => {
                            Some(entries.iter().map(|e| (e.part, e.leader_epoch)).collect())
                        }
                        Sent::UpdateMetadata { entries, .. } => {
                            Some(entries.iter().map(|e| (e.part, e.leader_epoch)).collect())
                        }
                        Sent::StopReplica { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .try_into()
                    .expect("one request of each")
            };
            let add = |batch: &mut RequestBatch, ctx: &Context, p: Part| {
                batch.add_leader_and_isr_assigned(ctx, &[1], p, &ctx.leadership(p).unwrap(), false);
            };
            add(&mut batch, &ctx, a);
            add(&mut batch, &ctx, b);
            led(&mut ctx, a, 7);
            add(&mut batch, &ctx, a);
            let expected = vec![(a, 7), (b, 0)];
            assert_eq!(sent_order(&mut batch, &ctx), [expected.clone(), expected]);
            // The next batch starts afresh: b first now.
            add(&mut batch, &ctx, b);
            add(&mut batch, &ctx, a);
            let expected = vec![(b, 0), (a, 7)];
            assert_eq!(sent_order(&mut batch, &ctx), [expected.clone(), expected]);
        }
    }

    #[test]
    fn a_run_added_unchanged_is_found_and_replaced_in_place_later() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        let parts: Vec<Part> = (0..3).map(|i| ctx.intern_part("t", i)).collect();
        let ra = ReplicaAssignment {
            replicas: smallvec::smallvec![1, 2],
            ..Default::default()
        };
        let lice = |leader_epoch| LeaderIsrAndControllerEpoch {
            leader_and_isr: LeaderAndIsr {
                leader_epoch,
                ..LeaderAndIsr::new(1, smallvec::smallvec![1, 2])
            },
            controller_epoch: 1,
        };
        for &p in &parts[..2] {
            ctx.update_assignment(p, &ra);
            ctx.put_leadership(p, &lice(0));
        }
        let mut batch = RequestBatch::default();
        // The third partition has no leadership: no entry.
        batch.add_leader_and_isr_unchanged(&ctx, 1, &parts);
        batch.add_leader_and_isr_unchanged(&ctx, 2, &parts[1..]);
        let entries = |batch: &RequestBatch, b| -> Vec<(Part, i32, bool)> {
            batch.pending_leader_and_isr()[&b]
                .values()
                .map(|e| (e.part, e.leader_epoch, e.is_new))
                .collect()
        };
        assert_eq!(
            entries(&batch, 1),
            [(parts[0], 0, false), (parts[1], 0, false)]
        );
        assert!(Arc::ptr_eq(
            &batch.pending_leader_and_isr()[&1]
                .get(parts[1])
                .unwrap()
                .state,
            &batch.pending_leader_and_isr()[&2]
                .get(parts[1])
                .unwrap()
                .state,
        ));
        batch.add_leader_and_isr(&ctx, &[1], parts[1], &lice(4), &ra, true);
        batch.add_leader_and_isr(&ctx, &[1], parts[2], &lice(5), &ra, false);
        assert_eq!(
            entries(&batch, 1),
            [
                (parts[0], 0, false),
                (parts[1], 4, true),
                (parts[2], 5, false)
            ]
        );
        assert_eq!(entries(&batch, 2), [(parts[1], 0, false)]);
    }

    #[test]
    fn runs_add_what_partition_by_partition_adds() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20), (3, 30)]);
        let parts: Vec<Part> = (0..6).map(|i| ctx.intern_part("t", i)).collect();
        for (i, &p) in parts.iter().enumerate() {
            let first = 1 + i as BrokerId % 3;
            let replicas: Replicas = smallvec::smallvec![first, 1 + first % 3];
            ctx.update_assignment(
                p,
                &ReplicaAssignment {
                    replicas: replicas.clone(),
                    ..Default::default()
                },
            );
            ctx.put_leadership(
                p,
                &LeaderIsrAndControllerEpoch {
                    leader_and_isr: LeaderAndIsr::new(first, replicas),
                    controller_epoch: 1,
                },
            );
        }
        ctx.queue_topic_deletion(&["u"]);
        // Broker 1's request has an entry already, broker 2's none; recipients repeat and hold -1.
        let recipients: [&[BrokerId]; 4] = [&[1, 2], &[2, 2, -1], &[], &[3, 1]];
        let run: Vec<(Part, &[BrokerId], LeaderIsrAndControllerEpoch)> = parts[1..5]
            .iter()
            .zip(recipients)
            .map(|(p, to)| (*p, to, ctx.leadership(*p).unwrap()))
            .collect();
        let (mut one_by_one, mut in_a_run) = (RequestBatch::default(), RequestBatch::default());
        for batch in [&mut one_by_one, &mut in_a_run] {
            batch.add_leader_and_isr_assigned(
                &ctx,
                &[1],
                parts[4],
                &ctx.leadership(parts[4]).unwrap(),
                true,
            );
            batch.add_stop_replica(&ctx, &[3], parts[2], true);
        }
        for (p, to, lice) in &run {
            one_by_one.add_leader_and_isr_assigned(&ctx, to, *p, lice, false);
        }
        in_a_run.add_leader_and_isr_run(&ctx, &run);
        for &p in &parts {
            one_by_one.add_stop_replica(&ctx, &[3], p, false);
        }
        in_a_run.add_stop_replicas(&ctx, 3, &parts, false);
        in_a_run.add_stop_replicas(&ctx, -1, &parts, false);
        let mut empty = RequestBatch::default();
        empty.add_leader_and_isr_run::<&[BrokerId]>(&ctx, &[]);
        assert!(
            empty.check_empty().is_ok(),
            "an empty run adds no UpdateMetadata brokers"
        );
        assert_eq!(
            one_by_one
                .pending_leader_and_isr()
                .keys()
                .collect::<Vec<_>>(),
            in_a_run.pending_leader_and_isr().keys().collect::<Vec<_>>()
        );
        for (broker, entries) in one_by_one.pending_leader_and_isr() {
            let theirs = &in_a_run.pending_leader_and_isr()[broker];
            assert_eq!(
                entries.values().collect::<Vec<_>>(),
                theirs.values().collect::<Vec<_>>()
            );
            for e in entries.values() {
                assert_eq!(theirs.get(e.part), Some(e), "found by partition");
            }
        }
        assert_eq!(
            one_by_one.pending_update_metadata(),
            in_a_run.pending_update_metadata()
        );
        assert_eq!(
            one_by_one.pending_stop_replica(),
            in_a_run.pending_stop_replica()
        );
        assert!(
            in_a_run.pending_stop_replica()[&3][&parts[2]].delete,
            "delete is sticky"
        );
        assert_eq!(
            one_by_one.send(&ctx, 3, &mut |_| {}),
            in_a_run.send(&ctx, 3, &mut |_| {})
        );
    }

    #[test]
    fn sticky_flags_sentinels_and_order() {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 10), (2, 20)]);
        let p = ctx.intern_part("t", 0);
        let ra = ReplicaAssignment {
            replicas: smallvec::smallvec![1, 2],
            ..Default::default()
        };
        ctx.update_assignment(p, &ra);
        let lice = LeaderIsrAndControllerEpoch {
            leader_and_isr: LeaderAndIsr::new(1, smallvec::smallvec![1, 2]),
            controller_epoch: 3,
        };
        ctx.put_leadership(p, &lice);

        let mut batch = RequestBatch::default();
        batch.add_leader_and_isr(&ctx, &[1, -1], p, &lice, &ra, true);
        batch.add_leader_and_isr(&ctx, &[1], p, &lice, &ra, false);
        assert!(
            batch.pending_leader_and_isr()[&1].get(p).unwrap().is_new,
            "is_new is sticky"
        );
        batch.add_stop_replica(&ctx, &[2], p, true);
        batch.add_stop_replica(&ctx, &[2], p, false);
        assert!(
            batch.pending_stop_replica()[&2][&p].delete,
            "delete is sticky"
        );
        assert!(batch.check_empty().is_err());

        ctx.queue_topic_deletion(&["t"]);
        batch.add_update_metadata(&ctx, &[], &[p]);
        let mut lines = Vec::new();
        let sent = batch.send(&ctx, 3, &mut |l| lines.push(l));
        assert!(matches!(
            sent[0],
            Sent::LeaderAndIsr {
                broker: 1,
                broker_epoch: 10,
                ..
            }
        ));
        let Sent::UpdateMetadata { brokers, entries } = &sent[1] else {
            panic!("UpdateMetadata second")
        };
        assert_eq!(brokers, &[1, 2], "one fan-out to every registered broker");
        assert_eq!(
            (entries[0].leader, entries[0].leader_epoch),
            (LEADER_DURING_DELETE, 0)
        );
        assert!(
            matches!(&sent[2], Sent::StopReplica { broker: 2, entries, .. } if entries[0].delete)
        );
        assert_eq!(lines[0], "Sending LeaderAndIsr request to broker 1 with 1 become-leader and 0 become-follower partitions");
        assert!(batch.check_empty().is_ok());
    }
}
