//! Kafka's binary protocol for the large part of the controller's requests: the partition states of
//! LeaderAndIsr (api key 4, v0–7) and UpdateMetadata (6, v0–8), written straight from the entries a
//! request batch keeps, without a message object per partition. An UpdateMetadata to every broker
//! at a million partitions is this loop; `kctl.kafka.protocol` writes the rest of the request (the
//! header fields, live brokers, tagged fields) around the bytes and decodes what brokers send.
//!
//! The layout follows Kafka 3.9's message schemas: before the grouped versions each state names its
//! topic; from them states are grouped by topic in order of first appearance (as Kafka's request
//! builders group them), with the topic id from the versions that carry one; flexible versions use
//! compact arrays and strings (unsigned varint of length + 1) and end every struct with an empty
//! tagged-field section.

use std::sync::Arc;

use crate::hash::{IndexMap, NameMap};
use crate::requests::{HasHead, Head, LeaderAndIsrEntry, UpdateMetadataEntry};

/// A topic id as Kafka writes it (two big-endian longs); all zeroes when the topic has none.
pub type TopicId = [u8; 16];

/// Why a request cannot be written: a version outside the schema or a length Kafka cannot carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The version-dependent shape of one request's partition-state section.
pub struct Layout {
    pub api: &'static str,
    pub max_version: i16,
    /// First version whose states are grouped by topic.
    pub grouped_from: i16,
    /// First flexible version.
    pub flexible_from: i16,
    /// First version whose topic states carry the topic id.
    pub topic_id_from: i16,
}

pub const LEADER_AND_ISR: Layout = Layout {
    api: "LeaderAndIsr",
    max_version: 7,
    grouped_from: 2,
    flexible_from: 4,
    topic_id_from: 5,
};

pub const UPDATE_METADATA: Layout = Layout {
    api: "UpdateMetadata",
    max_version: 8,
    grouped_from: 5,
    flexible_from: 6,
    topic_id_from: 7,
};

/// A request entry that writes its fields after the partition index.
pub trait WireState {
    fn write_fields(&self, w: &mut Writer, version: i16);
}

impl WireState for LeaderAndIsrEntry {
    fn write_fields(&self, w: &mut Writer, version: i16) {
        w.head(self.head());
        if version >= 3 {
            w.i32_array(self.adding());
            w.i32_array(self.removing());
        }
        if version >= 1 {
            w.buf.push(u8::from(self.is_new));
        }
        if version >= 6 {
            w.buf.push(self.recovery as u8);
        }
    }
}

impl<S: WireState> WireState for &S {
    fn write_fields(&self, w: &mut Writer, version: i16) {
        (**self).write_fields(w, version);
    }
}

impl WireState for UpdateMetadataEntry {
    fn write_fields(&self, w: &mut Writer, version: i16) {
        w.head(self.head());
        if version >= 4 {
            w.i32_array(&self.offline_replicas);
        }
    }
}

/// Kafka's primitive types into a growing buffer, compact or classic by the version's flexibility.
pub struct Writer {
    pub buf: Vec<u8>,
    flexible: bool,
}

impl Writer {
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// The fields both requests' partition states start with (after the partition index).
    fn head(
        &mut self,
        (controller_epoch, leader, leader_epoch, isr, partition_epoch, replicas): Head<'_>,
    ) {
        self.i32(controller_epoch);
        self.i32(leader);
        self.i32(leader_epoch);
        self.i32_array(isr);
        self.i32(partition_epoch);
        self.i32_array(replicas);
    }

    fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// An array's length prefix (`len` fits: the caller's counts come from in-memory slices
    /// checked against `i32::MAX` once, in [`encode_states`]).
    fn array_len(&mut self, len: usize) {
        if self.flexible {
            self.uvarint(len as u32 + 1);
        } else {
            self.i32(len as i32);
        }
    }

    fn i32_array(&mut self, xs: &[i32]) {
        self.array_len(xs.len());
        for &x in xs {
            self.i32(x);
        }
    }

    fn string(&mut self, s: &str) -> Result<(), WireError> {
        if s.len() > i16::MAX as usize {
            return Err(WireError(format!(
                "topic name of {} bytes is longer than Kafka's strings ({} bytes)",
                s.len(),
                i16::MAX
            )));
        }
        if self.flexible {
            self.uvarint(s.len() as u32 + 1);
        } else {
            self.buf.extend_from_slice(&(s.len() as i16).to_be_bytes());
        }
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }

    /// An empty tagged-field section (flexible versions only).
    fn end_struct(&mut self) {
        if self.flexible {
            self.buf.push(0);
        }
    }
}

/// The partition-state section of a request at `version` (`ungrouped_partition_states` or
/// `topic_states`, with its length prefix): `keys` are the `(topic, partition)` of `entries`.
pub fn encode_states<S: WireState>(
    layout: &Layout,
    keys: &[(Arc<str>, i32)],
    entries: &[S],
    version: i16,
    topic_ids: &NameMap<String, TopicId>,
) -> Result<Vec<u8>, WireError> {
    if !(0..=layout.max_version).contains(&version) {
        return Err(WireError(format!(
            "{} version {version} is not one of Kafka's (0 to {})",
            layout.api, layout.max_version
        )));
    }
    if entries.len() > i32::MAX as usize {
        return Err(WireError(format!("{} partition states", entries.len())));
    }
    let mut w = Writer {
        buf: Vec::with_capacity(entries.len() * 48 + 64),
        flexible: version >= layout.flexible_from,
    };
    if version < layout.grouped_from {
        w.array_len(entries.len());
        for ((topic, partition), entry) in keys.iter().zip(entries) {
            w.string(topic)?;
            w.i32(*partition);
            entry.write_fields(&mut w, version);
            w.end_struct();
        }
        return Ok(w.buf);
    }
    let mut groups: IndexMap<&str, Vec<usize>> = IndexMap::default();
    let mut last: Option<(&Arc<str>, usize)> = None;
    for (i, (topic, _)) in keys.iter().enumerate() {
        // Keys usually come in runs of one topic: look each run's topic up once.
        let slot = match last {
            Some((t, slot)) if Arc::ptr_eq(t, topic) => slot,
            _ => {
                let entry = groups.entry(&**topic);
                let slot = entry.index();
                entry.or_default();
                slot
            }
        };
        groups[slot].push(i);
        last = Some((topic, slot));
    }
    w.array_len(groups.len());
    for (topic, members) in &groups {
        w.string(topic)?;
        if version >= layout.topic_id_from {
            let id = topic_ids.get(*topic).copied().unwrap_or_default();
            w.buf.extend_from_slice(&id);
        }
        w.array_len(members.len());
        for &i in members {
            w.i32(keys[i].1);
            entries[i].write_fields(&mut w, version);
            w.end_struct();
        }
        w.end_struct();
    }
    Ok(w.buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LeaderRecoveryState;
    use crate::requests::LeaderAndIsrState;
    use smallvec::smallvec;

    fn um(leader: i32) -> UpdateMetadataEntry {
        UpdateMetadataEntry {
            part: 0,
            controller_epoch: 1,
            leader,
            leader_epoch: 2,
            isr: smallvec![leader],
            partition_epoch: 3,
            replicas: smallvec![leader],
            offline_replicas: smallvec![],
        }
    }

    #[test]
    fn groups_topics_in_order_of_first_appearance() {
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let keys = vec![(a.clone(), 0), (b.clone(), 0), (a.clone(), 1)];
        let entries = vec![um(1), um(2), um(3)];
        let out = encode_states(&UPDATE_METADATA, &keys, &entries, 5, &NameMap::default()).unwrap();
        // Two topics; "a" first with partitions 0 and 1.
        assert_eq!(&out[..4], &2i32.to_be_bytes());
        assert_eq!(&out[4..7], &[0, 1, b'a']);
        assert_eq!(&out[7..11], &2i32.to_be_bytes());
        assert_eq!(&out[11..15], &0i32.to_be_bytes());
    }

    #[test]
    fn flexible_versions_use_compact_lengths_and_tagged_sections() {
        let keys = vec![(Arc::from("t"), 7)];
        let state = LeaderAndIsrState {
            part: 0,
            controller_epoch: 1,
            leader: 1,
            leader_epoch: 0,
            isr: smallvec![1],
            partition_epoch: 0,
            replicas: smallvec![1],
            reassignment: None,
            recovery: LeaderRecoveryState::Recovering,
        };
        let entries = vec![LeaderAndIsrEntry {
            state: Arc::new(state),
            is_new: true,
        }];
        let mut ids = NameMap::default();
        ids.insert("t".to_string(), [7u8; 16]);
        let out = encode_states(&LEADER_AND_ISR, &keys, &entries, 7, &ids).unwrap();
        assert_eq!(&out[..3], &[2, 2, b't']);
        assert_eq!(&out[3..19], &[7u8; 16]);
        // The partition's last fields: is_new, recovery state, its tagged section, the topic's.
        assert_eq!(&out[out.len() - 4..], &[1, 1, 0, 0]);
    }

    #[test]
    fn refuses_versions_outside_the_schema() {
        let err = encode_states::<UpdateMetadataEntry>(
            &UPDATE_METADATA,
            &[],
            &[],
            9,
            &NameMap::default(),
        )
        .unwrap_err();
        assert!(err.0.contains("UpdateMetadata version 9"));
    }
}
