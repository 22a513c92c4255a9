//! The hash containers of the engine: FxHash instead of SipHash. Keys are small integers and
//! topic names the controller itself produced, so HashDoS resistance buys nothing here, and the
//! hot paths do several lookups per partition.

pub use rustc_hash::FxBuildHasher;

pub type HashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;
pub type HashSet<K> = std::collections::HashSet<K, FxBuildHasher>;
pub type IndexMap<K, V> = indexmap::IndexMap<K, V, FxBuildHasher>;
pub type IndexSet<K> = indexmap::IndexSet<K, FxBuildHasher>;
