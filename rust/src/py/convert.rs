//! Crossing the boundary: kctl's Python objects to and from the engine's Rust types (with the
//! classes `kctl.native` bound, [`crate::py::classes`]), and the two ways across — [`detached`]
//! into the engine without the GIL, [`attached`] back into Python from the engine — each turning
//! the other side's errors into its own.

use pyo3::exceptions::PyBaseException;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::model::{
    BrokerId, Brokers, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState,
};
use crate::py::classes::classes;
use crate::store::{Failure, FailureKind};

/// Run engine work with the GIL released; a failure comes back as kctl's Python exception.
pub fn detached<T: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> Result<T, Failure> + Send,
) -> PyResult<T> {
    py.detach(work).map_err(|e| failure_to_err(py, &e))
}

/// Call into Python from the engine (which runs without the GIL); a Python exception comes back
/// as a failure that keeps it.
pub fn attached<T>(call: impl FnOnce(Python<'_>) -> PyResult<T>) -> Result<T, Failure> {
    Python::attach(|py| call(py).map_err(|e| failure_from_err(py, &e)))
}

/// A Python error met without the GIL (the ZooKeeper codec's exchanges) as a failure, taking the
/// GIL only when there is one.
pub fn or_failure<T>(result: PyResult<T>) -> Result<T, Failure> {
    result.or_else(|err| attached(|_| Err(err)))
}

pub fn topic_partition<'py>(
    py: Python<'py>,
    topic: &str,
    partition: i32,
) -> PyResult<Bound<'py, PyAny>> {
    classes(py)?
        .topic_partition
        .bind(py)
        .call1((topic, partition))
}

pub fn leader_and_isr_to_py<'py>(
    py: Python<'py>,
    lai: &LeaderAndIsr,
) -> PyResult<Bound<'py, PyAny>> {
    let classes = classes(py)?;
    let isr = PyTuple::new(py, &lai.isr)?;
    classes.leader_and_isr.bind(py).call1((
        lai.leader,
        isr,
        lai.leader_epoch,
        lai.partition_epoch,
        classes.recovery_state(py, lai.recovery),
    ))
}

pub fn partition_state_to_py<'py>(
    py: Python<'py>,
    state: &LeaderIsrAndControllerEpoch,
) -> PyResult<Bound<'py, PyAny>> {
    let lai = leader_and_isr_to_py(py, &state.leader_and_isr)?;
    classes(py)?
        .leader_isr_and_controller_epoch
        .bind(py)
        .call1((lai, state.controller_epoch))
}

pub fn leader_and_isr_from_py(obj: &Bound<'_, PyAny>) -> PyResult<LeaderAndIsr> {
    let recovery: u8 = obj.getattr("leader_recovery_state")?.extract()?;
    Ok(LeaderAndIsr {
        leader: obj.getattr("leader")?.extract()?,
        isr: obj.getattr("isr")?.extract::<Brokers>()?,
        leader_epoch: obj.getattr("leader_epoch")?.extract()?,
        partition_epoch: obj.getattr("partition_epoch")?.extract()?,
        recovery: LeaderRecoveryState::from_code(recovery),
    })
}

/// A partition state as a plain tuple: `(leader, isr, leader_epoch, partition_epoch, recovery,
/// controller_epoch)`, cheaper to cross the boundary than kctl's dataclasses.
pub type StateTuple = (BrokerId, Brokers, i32, i32, u8, i32);

pub fn state_from_tuple(t: StateTuple) -> LeaderIsrAndControllerEpoch {
    let (leader, isr, leader_epoch, partition_epoch, recovery, controller_epoch) = t;
    LeaderIsrAndControllerEpoch {
        leader_and_isr: LeaderAndIsr {
            leader,
            isr,
            leader_epoch,
            partition_epoch,
            recovery: LeaderRecoveryState::from_code(recovery),
        },
        controller_epoch,
    }
}

pub fn state_to_tuple(l: &LeaderIsrAndControllerEpoch) -> StateTuple {
    let lai = &l.leader_and_isr;
    (
        lai.leader,
        lai.isr.clone(),
        lai.leader_epoch,
        lai.partition_epoch,
        lai.recovery as u8,
        l.controller_epoch,
    )
}

pub fn partition_state_from_py(obj: &Bound<'_, PyAny>) -> PyResult<LeaderIsrAndControllerEpoch> {
    Ok(LeaderIsrAndControllerEpoch {
        leader_and_isr: leader_and_isr_from_py(&obj.getattr("leader_and_isr")?)?,
        controller_epoch: obj.getattr("controller_epoch")?.extract()?,
    })
}

fn is_instance(py: Python<'_>, value: &Bound<'_, PyAny>, cls: &Py<pyo3::types::PyType>) -> bool {
    value.is_instance(cls.bind(py)).unwrap_or(false)
}

/// A Python exception object as a failure, keeping the object itself.
pub fn failure_from_exception(py: Python<'_>, value: &Bound<'_, PyAny>) -> Failure {
    let errors = classes(py).ok().map(|c| &c.errors);
    let kind = errors
        .and_then(|errors| {
            errors
                .kinds()
                .into_iter()
                .find(|(cls, _)| is_instance(py, value, cls))
                .map(|(_, kind)| kind)
        })
        .unwrap_or(FailureKind::Other);
    let type_name = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let message = value.str().map(|s| s.to_string()).unwrap_or_default();
    let payload: Py<PyAny> = value.clone().unbind();
    Failure {
        kind,
        type_name,
        message,
        store_error: errors.is_some_and(|errors| is_instance(py, value, &errors.store_error)),
        payload: Some(std::sync::Arc::new(payload)),
    }
}

pub fn failure_from_err(py: Python<'_>, err: &PyErr) -> Failure {
    failure_from_exception(py, err.value(py).as_any())
}

/// The Python exception a failure stands for: the original object when there is one, otherwise a
/// new instance of the kctl error class of its kind.
pub fn failure_to_py<'py>(py: Python<'py>, failure: &Failure) -> PyResult<Bound<'py, PyAny>> {
    if let Some(payload) = &failure.payload {
        if let Some(obj) = payload.downcast_ref::<Py<PyAny>>() {
            return Ok(obj.bind(py).clone());
        }
    }
    classes(py)?
        .errors
        .of(failure.kind)
        .bind(py)
        .call1((failure.message.as_str(),))
}

pub fn failure_to_err(py: Python<'_>, failure: &Failure) -> PyErr {
    match failure_to_py(py, failure) {
        Ok(value) => match value.cast_into::<PyBaseException>() {
            Ok(exc) => PyErr::from_value(exc.into_any()),
            Err(e) => PyErr::from(e),
        },
        Err(e) => e,
    }
}
