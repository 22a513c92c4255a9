//! The controller's data model in columnar-friendly form (reference §1): broker ids, partition and
//! replica states with their valid-previous-state tables, and a partition's stored state.
//!
//! Everything here mirrors `kctl.model`; the `kafka_name` strings and `Display` forms are the ones
//! the state-change log prints, so both engines write the same lines.

use std::fmt;

use smallvec::SmallVec;

pub type BrokerId = i32;
/// A list of brokers (an ISR, a replica list): inline up to RF 3, so that copying a partition's
/// state allocates nothing at the usual replication factors.
pub type Brokers = SmallVec<[BrokerId; 3]>;

pub const NO_LEADER: BrokerId = -1;
pub const LEADER_DURING_DELETE: BrokerId = -2;
pub const NO_EPOCH: i32 = -1;
pub const EPOCH_DURING_DELETE: i32 = -2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PartitionState {
    New = 0,
    Online = 1,
    Offline = 2,
    NonExistent = 3,
}

impl PartitionState {
    pub const ALL: [PartitionState; 4] =
        [Self::New, Self::Online, Self::Offline, Self::NonExistent];

    pub fn kafka_name(self) -> &'static str {
        match self {
            Self::New => "NewPartition",
            Self::Online => "OnlinePartition",
            Self::Offline => "OfflinePartition",
            Self::NonExistent => "NonExistentPartition",
        }
    }

    /// The states a partition may move from to reach `self` (reference §3.1), in state-id order.
    pub fn valid_previous_states(self) -> &'static [PartitionState] {
        match self {
            Self::New => &[Self::NonExistent],
            Self::Online | Self::Offline => &[Self::New, Self::Online, Self::Offline],
            Self::NonExistent => &[Self::Offline],
        }
    }

    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0 => Self::New,
            1 => Self::Online,
            2 => Self::Offline,
            3 => Self::NonExistent,
            _ => return None,
        })
    }
}

impl fmt::Display for PartitionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ReplicaState {
    New = 1,
    Online = 2,
    Offline = 3,
    DeletionStarted = 4,
    DeletionSuccessful = 5,
    DeletionIneligible = 6,
    NonExistent = 7,
}

impl ReplicaState {
    pub const ALL: [ReplicaState; 7] = [
        Self::New,
        Self::Online,
        Self::Offline,
        Self::DeletionStarted,
        Self::DeletionSuccessful,
        Self::DeletionIneligible,
        Self::NonExistent,
    ];

    pub fn kafka_name(self) -> &'static str {
        match self {
            Self::New => "NewReplica",
            Self::Online => "OnlineReplica",
            Self::Offline => "OfflineReplica",
            Self::DeletionStarted => "ReplicaDeletionStarted",
            Self::DeletionSuccessful => "ReplicaDeletionSuccessful",
            Self::DeletionIneligible => "ReplicaDeletionIneligible",
            Self::NonExistent => "NonExistentReplica",
        }
    }

    /// Reference §4.1, in state-id order.
    pub fn valid_previous_states(self) -> &'static [ReplicaState] {
        use ReplicaState::*;
        match self {
            New => &[NonExistent],
            Online | Offline => &[New, Online, Offline, DeletionIneligible],
            DeletionStarted => &[Offline],
            DeletionSuccessful => &[DeletionStarted],
            DeletionIneligible => &[Offline, DeletionStarted],
            NonExistent => &[DeletionSuccessful],
        }
    }

    pub fn from_id(id: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| *s as u8 == id)
    }
}

impl fmt::Display for ReplicaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

/// KIP-704's leader recovery state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum LeaderRecoveryState {
    #[default]
    Recovered = 0,
    Recovering = 1,
}

impl LeaderRecoveryState {
    /// The state of a KIP-704 code (anything but 1 is recovered, as Kafka reads it).
    pub fn from_code(code: u8) -> Self {
        if code == 1 {
            Self::Recovering
        } else {
            Self::Recovered
        }
    }
}

/// A partition's leader, ISR and epochs (Kafka's LeaderAndIsr); `partition_epoch` is the store
/// version of the state znode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaderAndIsr {
    pub leader: BrokerId,
    pub isr: Brokers,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub recovery: LeaderRecoveryState,
}

impl LeaderAndIsr {
    pub fn new(leader: BrokerId, isr: Brokers) -> Self {
        Self {
            leader,
            isr,
            leader_epoch: 0,
            partition_epoch: 0,
            recovery: LeaderRecoveryState::Recovered,
        }
    }

    /// Another leader and ISR at the next leader epoch; the partition epoch only changes on a write.
    pub fn new_leader_and_isr(&self, leader: BrokerId, isr: Brokers) -> Self {
        Self {
            leader,
            isr,
            leader_epoch: self.leader_epoch + 1,
            partition_epoch: self.partition_epoch,
            recovery: self.recovery,
        }
    }

    pub fn new_epoch(&self) -> Self {
        self.new_leader_and_isr(self.leader, self.isr.clone())
    }
}

/// Kafka 3.0's `LeaderAndIsr.toString`.
impl fmt::Display for LeaderAndIsr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LeaderAndIsr(leader={}, leaderEpoch={}, isr=List(",
            self.leader, self.leader_epoch
        )?;
        write_joined(f, &self.isr, ", ")?;
        f.write_str(")")?;
        if self.recovery == LeaderRecoveryState::Recovering {
            f.write_str(", leaderRecoveryState=RECOVERING")?;
        }
        write!(f, ", zkVersion={})", self.partition_epoch)
    }
}

/// A LeaderAndIsr plus the epoch of the controller that wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaderIsrAndControllerEpoch {
    pub leader_and_isr: LeaderAndIsr,
    pub controller_epoch: i32,
}

/// `kctl.model.LeaderIsrAndControllerEpoch.__str__`.
impl fmt::Display for LeaderIsrAndControllerEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lai = &self.leader_and_isr;
        write!(f, "(Leader:{},ISR:", lai.leader)?;
        write_joined(f, &lai.isr, ",")?;
        write!(
            f,
            ",LeaderEpoch:{},ControllerEpoch:{})",
            lai.leader_epoch, self.controller_epoch
        )
    }
}

/// RS, AR and RR of a partition (reference §1.3).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ReplicaAssignment {
    pub replicas: Brokers,
    pub adding: Brokers,
    pub removing: Brokers,
}

impl ReplicaAssignment {
    pub fn target_replicas(&self) -> Brokers {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing.contains(r))
            .collect()
    }

    pub fn origin_replicas(&self) -> Brokers {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding.contains(r))
            .collect()
    }

    pub fn is_being_reassigned(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    pub fn remove_replica(&self, broker: BrokerId) -> Self {
        let keep = |xs: &Brokers| xs.iter().copied().filter(|r| *r != broker).collect();
        Self {
            replicas: keep(&self.replicas),
            adding: keep(&self.adding),
            removing: keep(&self.removing),
        }
    }
}

/// `kctl.model.ReplicaAssignment.__str__`.
impl fmt::Display for ReplicaAssignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReplicaAssignment(replicas=")?;
        write_joined(f, &self.replicas, ",")?;
        f.write_str(", addingReplicas=")?;
        write_joined(f, &self.adding, ",")?;
        f.write_str(", removingReplicas=")?;
        write_joined(f, &self.removing, ",")?;
        f.write_str(")")
    }
}

pub fn write_joined(f: &mut impl fmt::Write, items: &[BrokerId], sep: &str) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

pub fn joined(items: &[BrokerId], sep: &str) -> String {
    let mut out = String::new();
    write_joined(&mut out, items, sep).expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_tables_match_the_reference() {
        assert_eq!(
            PartitionState::New.valid_previous_states(),
            &[PartitionState::NonExistent]
        );
        assert_eq!(
            PartitionState::NonExistent.valid_previous_states(),
            &[PartitionState::Offline]
        );
        assert_eq!(
            ReplicaState::Online.valid_previous_states(),
            &[
                ReplicaState::New,
                ReplicaState::Online,
                ReplicaState::Offline,
                ReplicaState::DeletionIneligible
            ]
        );
        assert_eq!(
            ReplicaState::NonExistent.valid_previous_states(),
            &[ReplicaState::DeletionSuccessful]
        );
        for s in ReplicaState::ALL {
            assert_eq!(ReplicaState::from_id(s as u8), Some(s));
        }
    }

    #[test]
    fn display_forms_are_kafkas() {
        let lai = LeaderAndIsr::new(1, smallvec::smallvec![1, 2, 3]);
        assert_eq!(
            lai.to_string(),
            "LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2, 3), zkVersion=0)"
        );
        let lice = LeaderIsrAndControllerEpoch {
            leader_and_isr: lai.new_leader_and_isr(2, smallvec::smallvec![2]),
            controller_epoch: 4,
        };
        assert_eq!(
            lice.to_string(),
            "(Leader:2,ISR:2,LeaderEpoch:1,ControllerEpoch:4)"
        );
        let ra = ReplicaAssignment {
            replicas: smallvec::smallvec![4, 5, 1],
            adding: smallvec::smallvec![4, 5],
            removing: smallvec::smallvec![1],
        };
        assert_eq!(
            ra.to_string(),
            "ReplicaAssignment(replicas=4,5,1, addingReplicas=4,5, removingReplicas=1)"
        );
        assert_eq!(ra.target_replicas().as_slice(), &[4, 5]);
        assert_eq!(ra.origin_replicas().as_slice(), &[1]);
    }
}
