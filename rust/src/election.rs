//! Leader election (reference §2), batch form: the candidates each rule allows, then the new state
//! once a selector picked a leader. Mirrors `kctl.election`.

use crate::context::{Context, Part};
use crate::model::{BrokerId, Brokers, LeaderAndIsr, LeaderRecoveryState};
use crate::store::Failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Offline { allow_unclean: bool },
    Reassign,
    Preferred,
    ControlledShutdown,
}

impl Strategy {
    /// The strategy as Kafka prints it in "Failed to elect leader … under strategy S".
    pub fn kafka_string(self) -> String {
        match self {
            Self::Offline { allow_unclean } => {
                format!("OfflinePartitionLeaderElectionStrategy({allow_unclean})")
            }
            Self::Reassign => "ReassignPartitionLeaderElectionStrategy".into(),
            Self::Preferred => "PreferredReplicaPartitionLeaderElectionStrategy".into(),
            Self::ControlledShutdown => "ControlledShutdownPartitionLeaderElectionStrategy".into(),
        }
    }

    /// The selector kind name (`kctl.selectors.ElectionKind` values).
    pub fn kind(self) -> &'static str {
        match self {
            Self::Offline { .. } => "offline",
            Self::Reassign => "reassign",
            Self::Preferred => "preferred",
            Self::ControlledShutdown => "controlled_shutdown",
        }
    }
}

/// One partition's election input: its stored state and, for offline elections, whether an unclean
/// election is allowed (`None`: its topic config could not be read, which fails the election).
#[derive(Clone, Debug)]
pub struct Input {
    pub part: Part,
    pub current: LeaderAndIsr,
    pub unclean_allowed: Option<bool>,
}

/// What a rule allows for one partition (broker lists inline up to three, as replica lists are:
/// an election batch of a broker failure makes them for tens of thousands of partitions).
#[derive(Clone, Debug)]
pub struct Candidates {
    /// The replica list the rule scans (assignment, or target replicas).
    pub scanned: Brokers,
    /// Brokers that receive LeaderAndIsr after a successful election.
    pub recipients: Brokers,
    /// Replicas the rule accepts, in its order; Kafka takes the first.
    pub allowed: Brokers,
    pub unclean: bool,
}

/// A selector's answer for one partition.
#[derive(Clone, Debug)]
pub enum Pick {
    Leader(BrokerId),
    NoLeader,
    /// The selector misbehaved for this partition (a `PluginError`).
    Error(Failure),
}

pub fn candidates(ctx: &Context, strategy: Strategy, input: &Input) -> Candidates {
    let p = input.part;
    let isr = &input.current.isr;
    match strategy {
        Strategy::Offline { allow_unclean } => {
            let assignment: Brokers = ctx.replicas(p).into();
            let live: Brokers = assignment
                .iter()
                .copied()
                .filter(|r| ctx.is_replica_online(*r, p, false))
                .collect();
            // Reference §2.3: an admin's unclean election overrides the per-partition flag.
            let unclean_allowed = if allow_unclean {
                Some(true)
            } else {
                input.unclean_allowed
            };
            let Some(unclean_allowed) = unclean_allowed else {
                return Candidates {
                    scanned: assignment,
                    recipients: live,
                    allowed: Brokers::new(),
                    unclean: false,
                };
            };
            let clean: Brokers = assignment
                .iter()
                .copied()
                .filter(|r| live.contains(r) && isr.contains(r))
                .collect();
            if !clean.is_empty() || !unclean_allowed {
                return Candidates {
                    scanned: assignment,
                    recipients: live,
                    allowed: clean,
                    unclean: false,
                };
            }
            let allowed = assignment
                .iter()
                .copied()
                .filter(|r| live.contains(r))
                .collect();
            Candidates {
                scanned: assignment,
                recipients: live,
                allowed,
                unclean: true,
            }
        }
        Strategy::Reassign => {
            let target: Brokers = ctx.target_replicas(p).into();
            let allowed = target
                .iter()
                .copied()
                .filter(|r| ctx.is_replica_online(*r, p, false) && isr.contains(r))
                .collect();
            Candidates {
                scanned: target.clone(),
                recipients: target,
                allowed,
                unclean: false,
            }
        }
        Strategy::Preferred => {
            let assignment: Brokers = ctx.replicas(p).into();
            let allowed = match assignment.first() {
                Some(head) if ctx.is_replica_online(*head, p, false) && isr.contains(head) => {
                    smallvec::smallvec![*head]
                }
                _ => Brokers::new(),
            };
            Candidates {
                scanned: assignment.clone(),
                recipients: assignment,
                allowed,
                unclean: false,
            }
        }
        Strategy::ControlledShutdown => {
            let assignment: Brokers = ctx.replicas(p).into();
            let live: Brokers = assignment
                .iter()
                .copied()
                .filter(|r| ctx.is_replica_online(*r, p, true))
                .collect();
            let allowed = assignment
                .iter()
                .copied()
                .filter(|r| live.contains(r) && isr.contains(r) && !ctx.is_shutting_down(*r))
                .collect();
            Candidates {
                scanned: assignment,
                recipients: live,
                allowed,
                unclean: false,
            }
        }
    }
}

/// The state after electing `leader` (reference §2.2).
pub fn new_state(
    ctx: &Context,
    strategy: Strategy,
    input: &Input,
    leader: BrokerId,
    leader_recovery: bool,
) -> LeaderAndIsr {
    let old = &input.current;
    match strategy {
        Strategy::Offline { .. } => {
            if old.isr.contains(&leader) {
                let isr = old
                    .isr
                    .iter()
                    .copied()
                    .filter(|r| ctx.is_replica_online(*r, input.part, false))
                    .collect();
                old.new_leader_and_isr(leader, isr)
            } else {
                let mut new = old.new_leader_and_isr(leader, smallvec::smallvec![leader]);
                if leader_recovery {
                    new.recovery = LeaderRecoveryState::Recovering;
                }
                new
            }
        }
        Strategy::Reassign | Strategy::Preferred => old.new_leader_and_isr(leader, old.isr.clone()),
        Strategy::ControlledShutdown => {
            let isr = old
                .isr
                .iter()
                .copied()
                .filter(|r| !ctx.is_shutting_down(*r))
                .collect();
            old.new_leader_and_isr(leader, isr)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ReplicaAssignment;

    fn setup() -> (Context, Part) {
        let mut ctx = Context::new();
        ctx.set_live_brokers(&[(1, 1), (2, 1), (3, 1)]);
        let p = ctx.intern_part("t", 0);
        ctx.update_assignment(
            p,
            &ReplicaAssignment {
                replicas: smallvec::smallvec![3, 1, 2],
                ..Default::default()
            },
        );
        (ctx, p)
    }

    #[test]
    fn offline_prefers_live_isr_then_unclean() {
        let (mut ctx, p) = setup();
        ctx.remove_live_brokers(&[3]);
        let clean = Input {
            part: p,
            current: LeaderAndIsr::new(3, smallvec::smallvec![3, 2]),
            unclean_allowed: Some(false),
        };
        let c = candidates(
            &ctx,
            Strategy::Offline {
                allow_unclean: false,
            },
            &clean,
        );
        assert_eq!(
            (c.allowed.to_vec(), c.unclean, c.recipients.to_vec()),
            (vec![2], false, vec![1, 2])
        );
        let s = new_state(
            &ctx,
            Strategy::Offline {
                allow_unclean: false,
            },
            &clean,
            2,
            false,
        );
        assert_eq!(
            (s.leader, s.isr.as_slice(), s.leader_epoch),
            (2, &[2][..], 1)
        );

        let dirty = Input {
            part: p,
            current: LeaderAndIsr::new(3, smallvec::smallvec![3]),
            unclean_allowed: Some(true),
        };
        let c = candidates(
            &ctx,
            Strategy::Offline {
                allow_unclean: true,
            },
            &dirty,
        );
        assert_eq!((c.allowed.to_vec(), c.unclean), (vec![1, 2], true));
        let s = new_state(
            &ctx,
            Strategy::Offline {
                allow_unclean: true,
            },
            &dirty,
            1,
            true,
        );
        assert_eq!(
            (s.isr, s.recovery),
            (smallvec::smallvec![1], LeaderRecoveryState::Recovering)
        );
    }

    #[test]
    fn preferred_only_considers_the_head() {
        let (ctx, p) = setup();
        let input = Input {
            part: p,
            current: LeaderAndIsr::new(1, smallvec::smallvec![1, 2]),
            unclean_allowed: None,
        };
        assert!(candidates(&ctx, Strategy::Preferred, &input)
            .allowed
            .is_empty());
        assert_eq!(
            Strategy::Preferred.kafka_string(),
            "PreferredReplicaPartitionLeaderElectionStrategy"
        );
        assert_eq!(
            Strategy::Offline {
                allow_unclean: false
            }
            .kafka_string(),
            "OfflinePartitionLeaderElectionStrategy(false)"
        );
    }

    #[test]
    fn controlled_shutdown_drops_shutting_down_brokers() {
        let (mut ctx, p) = setup();
        ctx.add_shutting_down_broker(3);
        let input = Input {
            part: p,
            current: LeaderAndIsr::new(3, smallvec::smallvec![3, 1, 2]),
            unclean_allowed: None,
        };
        let c = candidates(&ctx, Strategy::ControlledShutdown, &input);
        assert_eq!(
            (c.allowed.to_vec(), c.recipients.to_vec()),
            (vec![1, 2], vec![3, 1, 2])
        );
        let s = new_state(&ctx, Strategy::ControlledShutdown, &input, 1, false);
        assert_eq!(s.isr.as_slice(), &[1, 2]);
    }
}
