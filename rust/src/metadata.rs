//! A simulated broker's metadata cache: the partition states of the UpdateMetadata requests it
//! received (Kafka's `ZkMetadataCache`), with a digest of its contents.
//!
//! A simulated cluster of a hundred brokers applies every UpdateMetadata fan-out a hundred times,
//! and checks after every quiet point that each cache matches the store (invariant I7). Keeping
//! the states native makes applying a payload a loop without Python objects, and the digest (a
//! wrapping sum of one [`metadata_digest`] per cached partition) lets that check compare one
//! number per broker instead of every partition.

use std::hash::Hasher;
use std::sync::Arc;

use rustc_hash::FxHasher;

use crate::context::Replicas;
use crate::hash::HashMap;
use crate::model::{BrokerId, LEADER_DURING_DELETE};

/// One cached partition: the fields of an UpdateMetadata partition state after its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedState {
    pub controller_epoch: i32,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Replicas,
    pub partition_epoch: i32,
    pub replicas: Replicas,
    pub offline_replicas: Replicas,
}

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

impl CachedState {
    pub fn digest(&self, topic: &str, partition: i32) -> u64 {
        metadata_digest(
            topic,
            partition,
            self.leader,
            self.leader_epoch,
            &self.isr,
            self.partition_epoch,
            &self.replicas,
        )
    }
}

#[derive(Debug, Default)]
pub struct MetadataCache {
    topics: HashMap<Arc<str>, HashMap<i32, (CachedState, u64)>>,
    len: usize,
    digest: u64,
}

impl MetadataCache {
    /// Apply one partition state with its [`CachedState::digest`]; a leader of -2 (the topic is
    /// being deleted) removes the partition. Returns whether it removed a cached partition.
    pub fn apply(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        state: CachedState,
        digest: u64,
    ) -> bool {
        if state.leader == LEADER_DURING_DELETE {
            let Some(partitions) = self.topics.get_mut(&**topic) else {
                return false;
            };
            let Some((_, old)) = partitions.remove(&partition) else {
                return false;
            };
            if partitions.is_empty() {
                self.topics.remove(&**topic);
            }
            self.len -= 1;
            self.digest = self.digest.wrapping_sub(old);
            return true;
        }
        let partitions = match self.topics.get_mut(&**topic) {
            Some(partitions) => partitions,
            None => self.topics.entry(topic.clone()).or_default(),
        };
        match partitions.insert(partition, (state, digest)) {
            Some((_, old)) => self.digest = self.digest.wrapping_sub(old),
            None => self.len += 1,
        }
        self.digest = self.digest.wrapping_add(digest);
        false
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&CachedState> {
        self.topics.get(topic)?.get(&partition).map(|(s, _)| s)
    }

    pub fn has_topic(&self, topic: &str) -> bool {
        self.topics.contains_key(topic)
    }

    /// Every cached partition, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &CachedState)> {
        self.topics.iter().flat_map(|(topic, partitions)| {
            partitions.iter().map(move |(&p, (s, _))| (&**topic, p, s))
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    fn state(leader: BrokerId, leader_epoch: i32) -> CachedState {
        CachedState {
            controller_epoch: 1,
            leader,
            leader_epoch,
            isr: smallvec![1, 2],
            partition_epoch: 3,
            replicas: smallvec![1, 2],
            offline_replicas: smallvec![],
        }
    }

    fn put(cache: &mut MetadataCache, topic: &Arc<str>, partition: i32, s: CachedState) -> bool {
        let digest = s.digest(topic, partition);
        cache.apply(topic, partition, s, digest)
    }

    fn digest_of(topic: &str, partition: i32, s: &CachedState) -> u64 {
        metadata_digest(
            topic,
            partition,
            s.leader,
            s.leader_epoch,
            &s.isr,
            s.partition_epoch,
            &s.replicas,
        )
    }

    #[test]
    fn digest_follows_contents_whatever_the_order() {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut one = MetadataCache::default();
        put(&mut one, &a, 0, state(1, 0));
        put(&mut one, &b, 0, state(2, 0));
        put(&mut one, &a, 0, state(2, 1));
        let mut two = MetadataCache::default();
        put(&mut two, &b, 0, state(2, 0));
        put(&mut two, &a, 0, state(2, 1));
        assert_eq!(one.digest(), two.digest());
        assert_eq!(one.len(), 2);
        assert_eq!(
            one.digest(),
            digest_of("a", 0, &state(2, 1)).wrapping_add(digest_of("b", 0, &state(2, 0)))
        );
        assert_ne!(one.digest(), {
            let mut three = MetadataCache::default();
            put(&mut three, &a, 0, state(2, 0));
            put(&mut three, &b, 0, state(2, 0));
            three.digest()
        });
    }

    #[test]
    fn leader_during_delete_removes_the_partition_and_its_topic() {
        let a: Arc<str> = "a".into();
        let mut cache = MetadataCache::default();
        put(&mut cache, &a, 0, state(1, 0));
        put(&mut cache, &a, 1, state(1, 0));
        assert!(put(&mut cache, &a, 0, state(LEADER_DURING_DELETE, 0)));
        assert!(!put(&mut cache, &a, 0, state(LEADER_DURING_DELETE, 0)));
        assert!(cache.has_topic("a"));
        assert!(put(&mut cache, &a, 1, state(LEADER_DURING_DELETE, 0)));
        assert!(!cache.has_topic("a") && cache.is_empty() && cache.digest() == 0);
    }

    #[test]
    fn topic_and_partition_boundaries_change_the_digest() {
        let s = state(1, 0);
        assert_ne!(digest_of("ab", 1, &s), digest_of("a", 1, &s));
        assert_ne!(digest_of("t", 1, &s), digest_of("t", 2, &s));
    }
}
