//! The partitions a broker hosts, as its checks of LeaderAndIsr and StopReplica requests read
//! them (Kafka's `ReplicaManager.allPartitions`: each online at the leader epoch last accepted,
//! or offline on a failed log directory), and those checks, in Kafka's order
//! (`ReplicaManager.becomeLeaderOrFollower` and `stopReplicas`). A simulated broker checks
//! thousands of partitions per request; kept here, that costs no Python object per partition.

use std::sync::Arc;

use crate::hash::{HashMap, NameMap};

/// A leader epoch that names none: every accepted epoch is newer.
pub const NO_EPOCH: i32 = -1;
/// The leader epoch of a StopReplica that deletes a topic's partition.
pub const EPOCH_DURING_DELETE: i32 = -2;

/// What a broker holds of one partition it hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosted {
    /// Online, at this leader epoch.
    Online(i32),
    /// Its log directory failed: every request for it answers `KAFKA_STORAGE_ERROR`.
    Offline,
}

/// The per-partition answers of the two checks, with Kafka's error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionError {
    None,
    /// Kafka's answer to a leader epoch that is not newer than the one held.
    StaleControllerEpoch,
    UnknownTopicOrPartition,
    KafkaStorageError,
    FencedLeaderEpoch,
}

impl PartitionError {
    /// Every answer, in the order of their indices (`as usize`).
    pub const ALL: [PartitionError; 5] = [
        PartitionError::None,
        PartitionError::StaleControllerEpoch,
        PartitionError::UnknownTopicOrPartition,
        PartitionError::KafkaStorageError,
        PartitionError::FencedLeaderEpoch,
    ];

    /// Kafka's error code.
    pub const fn code(self) -> i16 {
        match self {
            PartitionError::None => 0,
            PartitionError::StaleControllerEpoch => 11,
            PartitionError::UnknownTopicOrPartition => 3,
            PartitionError::KafkaStorageError => 56,
            PartitionError::FencedLeaderEpoch => 74,
        }
    }
}

/// The hosted partitions of one topic, by partition id.
pub type TopicHosted = HashMap<i32, Hosted>;

/// A broker process's hosted partitions (a restarted process starts with none).
#[derive(Debug, Default)]
pub struct HostedPartitions {
    topics: NameMap<Arc<str>, TopicHosted>,
}

impl HostedPartitions {
    pub fn get(&self, topic: &str, partition: i32) -> Option<Hosted> {
        self.topics.get(topic)?.get(&partition).copied()
    }

    /// The partitions of `topic` (none yet: an empty table, kept).
    pub fn topic(&mut self, topic: &Arc<str>) -> &mut TopicHosted {
        if !self.topics.contains_key(&**topic) {
            self.topics.insert(topic.clone(), TopicHosted::default());
        }
        self.topics.get_mut(&**topic).expect("inserted above")
    }

    /// The log directory of the partition failed: an online one goes offline (one not hosted
    /// stays so: its next LeaderAndIsr finds the failed directory).
    pub fn mark_offline(&mut self, topic: &str, partition: i32) {
        if let Some(hosted) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
        {
            *hosted = Hosted::Offline;
        }
    }
}

/// `becomeLeaderOrFollower`'s checks of one partition of `topic`, in Kafka's order: offline, a
/// leader epoch not newer than the one held, this broker not among the replicas, then (after a
/// log directory failed) a partition neither hosted nor new, whose log may be on the failed
/// directory and must not be re-created. An accepted partition is held at its leader epoch.
pub fn become_leader_or_follower(
    topic: &mut TopicHosted,
    partition: i32,
    leader_epoch: i32,
    replicas: &[i32],
    is_new: bool,
    broker_id: i32,
    log_dir_failed: bool,
) -> PartitionError {
    let held = match topic.get(&partition) {
        Some(Hosted::Offline) => return PartitionError::KafkaStorageError,
        Some(Hosted::Online(epoch)) => Some(*epoch),
        None => None,
    };
    if leader_epoch <= held.unwrap_or(NO_EPOCH) {
        PartitionError::StaleControllerEpoch
    } else if !replicas.contains(&broker_id) {
        PartitionError::UnknownTopicOrPartition
    } else if held.is_none() && !is_new && log_dir_failed {
        PartitionError::KafkaStorageError
    } else {
        topic.insert(partition, Hosted::Online(leader_epoch));
        PartitionError::None
    }
}

/// `stopReplicas`' checks of one partition of `topic`: offline, then a leader epoch older than the one held (-2, a deletion, and -1, none, always
/// pass). A deleted partition is no longer held.
pub fn stop_replica(
    topic: &mut TopicHosted,
    partition: i32,
    leader_epoch: i32,
    delete: bool,
) -> PartitionError {
    match topic.get(&partition) {
        Some(Hosted::Offline) => return PartitionError::KafkaStorageError,
        Some(Hosted::Online(held))
            if leader_epoch != EPOCH_DURING_DELETE
                && leader_epoch != NO_EPOCH
                && leader_epoch < *held =>
        {
            return PartitionError::FencedLeaderEpoch
        }
        _ => {}
    }
    if delete {
        topic.remove(&partition);
    }
    PartitionError::None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosted() -> (HostedPartitions, Arc<str>) {
        (HostedPartitions::default(), Arc::from("t"))
    }

    #[test]
    fn leader_and_isr_checks_in_kafkas_order() {
        let (mut h, t) = hosted();
        let check = |h: &mut HostedPartitions, epoch, replicas: &[i32], is_new, failed| {
            become_leader_or_follower(h.topic(&t), 0, epoch, replicas, is_new, 1, failed)
        };
        assert_eq!(
            check(&mut h, 0, &[2], true, false),
            PartitionError::UnknownTopicOrPartition
        );
        assert_eq!(h.get("t", 0), None);
        assert_eq!(
            check(&mut h, 0, &[1, 2], false, true),
            PartitionError::KafkaStorageError
        );
        assert_eq!(
            check(&mut h, 0, &[1, 2], false, false),
            PartitionError::None
        );
        assert_eq!(h.get("t", 0), Some(Hosted::Online(0)));
        // Not newer (checked before the replicas), then hosted: a failed directory no longer matters.
        assert_eq!(
            check(&mut h, 0, &[2], true, false),
            PartitionError::StaleControllerEpoch
        );
        assert_eq!(check(&mut h, 3, &[1], false, true), PartitionError::None);
        assert_eq!(h.get("t", 0), Some(Hosted::Online(3)));
        h.mark_offline("t", 0);
        h.mark_offline("t", 7); // not hosted: stays so
        assert_eq!(h.get("t", 7), None);
        assert_eq!(
            check(&mut h, 9, &[1], true, false),
            PartitionError::KafkaStorageError
        );
        assert_eq!(h.get("t", 0), Some(Hosted::Offline));
    }

    #[test]
    fn stop_replica_checks_in_kafkas_order() {
        let (mut h, t) = hosted();
        assert_eq!(stop_replica(h.topic(&t), 0, 5, true), PartitionError::None);
        become_leader_or_follower(h.topic(&t), 0, 5, &[1], true, 1, false);
        let stop =
            |h: &mut HostedPartitions, epoch, delete| stop_replica(h.topic(&t), 0, epoch, delete);
        assert_eq!(stop(&mut h, 4, true), PartitionError::FencedLeaderEpoch);
        assert_eq!(stop(&mut h, 5, false), PartitionError::None);
        assert_eq!(h.get("t", 0), Some(Hosted::Online(5)));
        assert_eq!(stop(&mut h, NO_EPOCH, false), PartitionError::None);
        assert_eq!(
            stop(&mut h, EPOCH_DURING_DELETE, true),
            PartitionError::None
        );
        assert_eq!(h.get("t", 0), None);
        become_leader_or_follower(h.topic(&t), 0, 1, &[1], true, 1, false);
        h.mark_offline("t", 0);
        assert_eq!(
            stop(&mut h, EPOCH_DURING_DELETE, true),
            PartitionError::KafkaStorageError
        );
        assert_eq!(h.get("t", 0), Some(Hosted::Offline));
    }

    #[test]
    fn codes_are_kafkas() {
        let codes: Vec<i16> = PartitionError::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(codes, [0, 11, 3, 56, 74]);
        for (i, e) in PartitionError::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i);
        }
    }
}
