//! The hash containers of the engine: FxHash instead of SipHash, on hot paths that do several
//! lookups per partition. The controller's keys are partition and broker ids and the topics of
//! its store, which only the cluster's operators write. A broker's tables are the exception
//! ([`NameMap`]): a broker process reads topic names from whoever sends it controller requests,
//! and FxHash is unkeyed, so names made to collide would make every lookup of a table linear.

pub use rustc_hash::FxBuildHasher;

pub type HashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;
pub type HashSet<K> = std::collections::HashSet<K, FxBuildHasher>;
pub type IndexMap<K, V> = indexmap::IndexMap<K, V, FxBuildHasher>;
pub type IndexSet<K> = indexmap::IndexSet<K, FxBuildHasher>;

/// A broker's map keyed by topic names: std's SipHash, keyed at random per table, so that no
/// peer can choose names that collide. A name is hashed once per run of a topic's partitions,
/// not per partition, on the hot paths. (The controller's tables stay on FxHash: with SipHash,
/// its failover at 1M partitions took 58 ms more.)
pub type NameMap<K, V> = std::collections::HashMap<K, V, std::hash::RandomState>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn each_name_table_hashes_with_a_key_of_its_own() {
        let (one, other) = (
            NameMap::<String, ()>::default(),
            NameMap::<String, ()>::default(),
        );
        assert_ne!(
            one.hasher().hash_one("orders"),
            other.hasher().hash_one("orders")
        );
    }
}
