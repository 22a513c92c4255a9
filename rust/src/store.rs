//! What the native state machines need from the metadata store: bulk partition-state reads,
//! creates and conditional updates, and topic configs (for unclean elections). The shapes mirror
//! `kctl.stores.base` (per-key read errors; successful / to-retry / failed updates, each in the
//! store's order) so that results and logs come out exactly as the reference engine's.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::context::{Context, Part, TopicIdx};
use crate::model::{LeaderAndIsr, LeaderIsrAndControllerEpoch};

/// Why something failed, as the Python exception it stands for: its class name and message, plus
/// (when it came from Python) the original exception object, returned as is. Clones share it, as
/// the reference shares one exception object among all the partitions a failure hit.
#[derive(Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub type_name: String,
    pub message: String,
    /// True for `kctl.errors.StoreError` and its subclasses.
    pub store_error: bool,
    pub payload: Option<Arc<dyn Any + Send + Sync>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    NoNode,
    ControllerMoved,
    StateChangeFailed,
    IllegalState,
    IllegalArgument,
    Plugin,
    Other,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        let type_name = match kind {
            FailureKind::NoNode => "NoNodeError",
            FailureKind::ControllerMoved => "ControllerMovedError",
            FailureKind::StateChangeFailed => "StateChangeFailedError",
            FailureKind::IllegalState => "IllegalStateError",
            FailureKind::IllegalArgument => "IllegalArgumentError",
            FailureKind::Plugin => "PluginError",
            FailureKind::Other => "KctlError",
        };
        Self {
            kind,
            type_name: type_name.into(),
            message: message.into(),
            store_error: kind == FailureKind::NoNode,
            payload: None,
        }
    }

    pub fn state_change_failed(message: impl Into<String>) -> Self {
        Self::new(FailureKind::StateChangeFailed, message)
    }

    /// `type(error).__name__: error`, as the state-change log prints it.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.type_name, self.message)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Failure({:?}, {})", self.kind, self.describe())
    }
}

/// Where a partition's state is stored, without a chroot: `/brokers/topics/<t>/partitions/<p>/state`
/// (`kctl.stores.paths.partition_state` on the Python side).
pub fn partition_state_path(topic: &str, partition: i32) -> String {
    format!("/brokers/topics/{topic}/partitions/{partition}/state")
}

/// One partition's stored state as read.
pub enum Read {
    Found(LeaderIsrAndControllerEpoch),
    /// The state znode does not exist (or is empty).
    Missing,
    Failed(Failure),
}

/// The outcome of a bulk conditional update, each list in the store's order.
#[derive(Default)]
pub struct Updated {
    pub successful: Vec<(Part, LeaderAndIsr)>,
    pub to_retry: Vec<Part>,
    pub failed: Vec<(Part, Failure)>,
}

pub trait Store {
    /// Read the states; `Err` when the whole read failed.
    fn read_states(&mut self, ctx: &Context, parts: &[Part]) -> Result<Vec<Read>, Failure>;

    /// Create the states (fenced); per partition `None` on success.
    fn create_states(
        &mut self,
        ctx: &Context,
        states: &[(Part, LeaderIsrAndControllerEpoch)],
        fence: i32,
    ) -> Result<Vec<Option<Failure>>, Failure>;

    /// Conditionally write each state at the version in its `partition_epoch` (fenced).
    fn update_states(
        &mut self,
        ctx: &Context,
        updates: &[(Part, LeaderAndIsr)],
        controller_epoch: i32,
        fence: i32,
    ) -> Result<Updated, Failure>;

    /// Whether a conditional write may start from the context's cached state instead of a read
    /// (`Machine::read_or_cached`): a store whose reads are round trips (ZooKeeper) says so.
    fn writes_from_cache(&self) -> bool {
        false
    }

    /// Each topic's `unclean.leader.election.enable` override (None when not set); `Err` when the
    /// whole read failed.
    fn unclean_overrides(
        &mut self,
        ctx: &Context,
        topics: &[TopicIdx],
    ) -> Result<Vec<Result<Option<String>, Failure>>, Failure>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_state_path_is_kafkas() {
        assert_eq!(
            partition_state_path("orders", 7),
            "/brokers/topics/orders/partitions/7/state"
        );
    }
}
