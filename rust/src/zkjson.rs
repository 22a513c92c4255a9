//! Kafka's JSON for partition-state znodes, byte for byte (`kctl.stores.zkdata` has the single
//! encoder and the decoders): the ZooKeeper store's bulk writes encode thousands at once.

use std::fmt::Write;

use crate::model::{BrokerId, LeaderRecoveryState};

/// One state to encode: leader, ISR, leader epoch, recovery state, controller epoch.
pub type StateFields<'a> = (BrokerId, &'a [BrokerId], i32, LeaderRecoveryState, i32);

/// `{"controller_epoch":..,"leader":..,"version":1,"leader_epoch":..,"isr":[..]}`, Kafka's key
/// order, with `"leader_recovery_state":1` last only when recovering (Kafka 3.2+).
pub fn partition_state(
    (leader, isr, leader_epoch, recovery, controller_epoch): StateFields<'_>,
) -> String {
    let mut out = String::with_capacity(80 + 4 * isr.len());
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        r#"{{"controller_epoch":{controller_epoch},"leader":{leader},"version":1,"leader_epoch":{leader_epoch},"isr":["#
    );
    for (i, broker) in isr.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{broker}");
    }
    out.push(']');
    if recovery == LeaderRecoveryState::Recovering {
        out.push_str(r#","leader_recovery_state":1"#);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_bytes() {
        assert_eq!(
            partition_state((1, &[1, 2, 3], 5, LeaderRecoveryState::Recovered, 2)),
            r#"{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2,3]}"#
        );
        assert_eq!(
            partition_state((-1, &[4], 0, LeaderRecoveryState::Recovering, 1)),
            r#"{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":0,"isr":[4],"leader_recovery_state":1}"#
        );
    }
}
