//! The Python classes the extension builds and recognises, handed over once by `kctl.native` at
//! import (`kctl._engine.bind`): the extension never imports a kctl module by its path, so moving a
//! class to another module changes only the one call that binds it.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::hosted::PartitionError;
use crate::model::LeaderRecoveryState;
use crate::store::FailureKind;

/// kctl's classes, as `kctl._engine.bind` received them.
pub struct Classes {
    pub topic_partition: Py<PyType>,
    pub leader_and_isr: Py<PyType>,
    pub leader_isr_and_controller_epoch: Py<PyType>,
    /// `LeaderRecoveryState.RECOVERED` and `.RECOVERING`, by code.
    recovery_states: [Py<PyAny>; 2],
    pub leader_and_isr_partition_state: Py<PyType>,
    pub update_metadata_partition_state: Py<PyType>,
    pub stop_replica_partition_state: Py<PyType>,
    /// The `kctl.errors.Errors` member of each `PartitionError`, by index.
    partition_errors: [Py<PyAny>; PartitionError::ALL.len()],
    pub errors: Errors,
}

/// The error classes a failure is recognised by and rebuilt as.
pub struct Errors {
    pub kctl_error: Py<PyType>,
    pub store_error: Py<PyType>,
    pub no_node_error: Py<PyType>,
    pub controller_moved_error: Py<PyType>,
    pub state_change_failed_error: Py<PyType>,
    pub illegal_state_error: Py<PyType>,
    pub illegal_argument_error: Py<PyType>,
    pub plugin_error: Py<PyType>,
}

impl Errors {
    /// The class a failure of `kind` stands for (`KctlError` for any other).
    pub fn of(&self, kind: FailureKind) -> &Py<PyType> {
        match kind {
            FailureKind::NoNode => &self.no_node_error,
            FailureKind::ControllerMoved => &self.controller_moved_error,
            FailureKind::StateChangeFailed => &self.state_change_failed_error,
            FailureKind::IllegalState => &self.illegal_state_error,
            FailureKind::IllegalArgument => &self.illegal_argument_error,
            FailureKind::Plugin => &self.plugin_error,
            FailureKind::Other => &self.kctl_error,
        }
    }

    /// The kinds a Python exception is recognised as, most specific first.
    pub fn kinds(&self) -> [(&Py<PyType>, FailureKind); 5] {
        [
            (&self.controller_moved_error, FailureKind::ControllerMoved),
            (&self.no_node_error, FailureKind::NoNode),
            (
                &self.state_change_failed_error,
                FailureKind::StateChangeFailed,
            ),
            (&self.illegal_state_error, FailureKind::IllegalState),
            (&self.plugin_error, FailureKind::Plugin),
        ]
    }
}

impl Classes {
    pub fn recovery_state<'py>(
        &self,
        py: Python<'py>,
        state: LeaderRecoveryState,
    ) -> &Bound<'py, PyAny> {
        self.recovery_states[state as usize].bind(py)
    }

    pub fn partition_error<'py>(
        &self,
        py: Python<'py>,
        error: PartitionError,
    ) -> &Bound<'py, PyAny> {
        self.partition_errors[error as usize].bind(py)
    }
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// The bound classes; an error naming the missing call when `kctl.native` has not bound them.
pub fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get(py).ok_or_else(|| {
        PyRuntimeError::new_err(
            "kctl._engine.bind() has not been called: import kctl.native before using the engine",
        )
    })
}

/// Hand the extension the classes it builds and recognises; called once, by `kctl.native` (with
/// keyword arguments).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn bind(
    py: Python<'_>,
    topic_partition: Py<PyType>,
    leader_and_isr: Py<PyType>,
    leader_isr_and_controller_epoch: Py<PyType>,
    leader_recovery_state: Bound<'_, PyType>,
    leader_and_isr_partition_state: Py<PyType>,
    update_metadata_partition_state: Py<PyType>,
    stop_replica_partition_state: Py<PyType>,
    kafka_errors: Bound<'_, PyType>,
    kctl_error: Py<PyType>,
    store_error: Py<PyType>,
    no_node_error: Py<PyType>,
    controller_moved_error: Py<PyType>,
    state_change_failed_error: Py<PyType>,
    illegal_state_error: Py<PyType>,
    illegal_argument_error: Py<PyType>,
    plugin_error: Py<PyType>,
) -> PyResult<()> {
    let recovery = |state: LeaderRecoveryState| -> PyResult<Py<PyAny>> {
        Ok(leader_recovery_state.call1((state as u8,))?.unbind())
    };
    let classes = Classes {
        topic_partition,
        leader_and_isr,
        leader_isr_and_controller_epoch,
        recovery_states: [
            recovery(LeaderRecoveryState::Recovered)?,
            recovery(LeaderRecoveryState::Recovering)?,
        ],
        leader_and_isr_partition_state,
        update_metadata_partition_state,
        stop_replica_partition_state,
        partition_errors: PartitionError::ALL
            .map(|e| kafka_errors.call1((e.code(),)).map(Bound::unbind))
            .into_iter()
            .collect::<PyResult<Vec<_>>>()?
            .try_into()
            .expect("one member per error"),
        errors: Errors {
            kctl_error,
            store_error,
            no_node_error,
            controller_moved_error,
            state_change_failed_error,
            illegal_state_error,
            illegal_argument_error,
            plugin_error,
        },
    };
    CLASSES
        .set(py, classes)
        .map_err(|_| PyRuntimeError::new_err("kctl._engine.bind() was already called"))
}
