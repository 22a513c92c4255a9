//! A simulated broker's metadata cache: the partition states of the UpdateMetadata requests it
//! received (Kafka's `ZkMetadataCache`), with a digest of its contents.
//!
//! A simulated cluster of a hundred brokers applies every UpdateMetadata fan-out a hundred times,
//! and checks after every quiet point that each cache matches the store (invariant I7). So a cache
//! entry is a reference into the request's shared payload (every broker of a fan-out points at the
//! same entries instead of holding a copy), partitions are indexed by id, and the digest (a
//! wrapping sum of one [`metadata_digest`] per cached partition) lets that check compare one number
//! per broker instead of every partition.

use std::hash::Hasher;
use std::sync::Arc;

use rustc_hash::FxHasher;

use crate::hash::HashMap;
use crate::model::{BrokerId, LEADER_DURING_DELETE};
use crate::requests::UpdateMetadataEntry;

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
pub type Payload = Arc<Vec<UpdateMetadataEntry>>;

/// A cached partition: entry `at` of `payload`, and its digest.
#[derive(Clone, Debug)]
struct Slot {
    payload: Payload,
    at: u32,
    digest: u64,
}

impl Slot {
    fn state(&self) -> &UpdateMetadataEntry {
        &self.payload[self.at as usize]
    }
}

/// One topic's cached partitions, indexed by partition id (ids are dense from 0).
#[derive(Debug, Default)]
struct Partitions {
    slots: Vec<Option<Slot>>,
    len: usize,
}

#[derive(Debug, Default)]
pub struct MetadataCache {
    topics: HashMap<Arc<str>, Partitions>,
    digest: u64,
}

impl MetadataCache {
    /// Apply a payload: entry `i` is the state of `keys[i]`, with digest `digests[i]`; a leader of
    /// -2 (the topic is being deleted) removes the partition. Returns the indices of the entries
    /// that removed a cached partition. Keys come grouped by topic, so a topic is looked up once
    /// per run of its partitions.
    pub fn apply(
        &mut self,
        keys: &[(Arc<str>, i32)],
        payload: &Payload,
        digests: &[u64],
    ) -> Vec<usize> {
        let mut removed = Vec::new();
        let mut at = 0;
        for run in keys.chunk_by(|a, b| Arc::ptr_eq(&a.0, &b.0)) {
            let topic = &run[0].0;
            let partitions = match self.topics.get_mut(&**topic) {
                Some(partitions) => partitions,
                None => self.topics.entry(topic.clone()).or_default(),
            };
            for (_, partition) in run {
                let id = usize::try_from(*partition).expect("partition ids are not negative");
                let old = if payload[at].leader == LEADER_DURING_DELETE {
                    let old = partitions.slots.get_mut(id).and_then(Option::take);
                    if old.is_some() {
                        removed.push(at);
                    }
                    old
                } else {
                    if partitions.slots.len() <= id {
                        partitions.slots.resize(id + 1, None);
                    }
                    let slot = Slot {
                        payload: payload.clone(),
                        at: u32::try_from(at).expect("fewer than 2^32 entries"),
                        digest: digests[at],
                    };
                    self.digest = self.digest.wrapping_add(slot.digest);
                    partitions.len += 1;
                    partitions.slots[id].replace(slot)
                };
                if let Some(old) = old {
                    self.digest = self.digest.wrapping_sub(old.digest);
                    partitions.len -= 1;
                }
                at += 1;
            }
            if partitions.len == 0 {
                self.topics.remove(&**topic);
            }
        }
        removed
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&UpdateMetadataEntry> {
        let id = usize::try_from(partition).ok()?;
        self.topics
            .get(topic)?
            .slots
            .get(id)?
            .as_ref()
            .map(Slot::state)
    }

    pub fn has_topic(&self, topic: &str) -> bool {
        self.topics.contains_key(topic)
    }

    /// Every cached partition, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &UpdateMetadataEntry)> {
        self.topics.iter().flat_map(|(topic, partitions)| {
            partitions
                .slots
                .iter()
                .enumerate()
                .filter_map(move |(id, slot)| {
                    let partition = i32::try_from(id).expect("partition ids fit an i32");
                    slot.as_ref().map(|s| (&**topic, partition, s.state()))
                })
        })
    }

    pub fn len(&self) -> usize {
        self.topics.values().map(|p| p.len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// The wrapping sum of the cached partitions' [`metadata_digest`]s.
    pub fn digest(&self) -> u64 {
        self.digest
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

    /// Apply `(topic, partition, entry)`s as one payload; returns the removed keys.
    fn put(
        cache: &mut MetadataCache,
        items: &[(&Arc<str>, i32, UpdateMetadataEntry)],
    ) -> Vec<(String, i32)> {
        let keys: Vec<(Arc<str>, i32)> = items.iter().map(|(t, p, _)| ((*t).clone(), *p)).collect();
        let digests: Vec<u64> = items
            .iter()
            .map(|(t, p, e)| entry_digest(t, *p, e))
            .collect();
        let payload: Payload = Arc::new(items.iter().map(|(_, _, e)| e.clone()).collect());
        cache
            .apply(&keys, &payload, &digests)
            .into_iter()
            .map(|i| (keys[i].0.to_string(), keys[i].1))
            .collect()
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
        assert_eq!(one.get("a", 0), Some(&entry(2, 1)));
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
    fn topic_and_partition_boundaries_change_the_digest() {
        let e = entry(1, 0);
        assert_ne!(entry_digest("ab", 1, &e), entry_digest("a", 1, &e));
        assert_ne!(entry_digest("t", 1, &e), entry_digest("t", 2, &e));
    }
}
