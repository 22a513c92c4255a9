//! Conversions between kctl's Python objects and the engine's Rust types, and the Python classes
//! the engine builds (looked up once).

use pyo3::exceptions::PyBaseException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use crate::model::{
    BrokerId, Brokers, LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState,
};
use crate::store::{Failure, FailureKind};

static TOPIC_PARTITION: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static LEADER_AND_ISR: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static LICE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static RECOVERY_STATE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

pub fn cached<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    module: &str,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(value) = cell.get(py) {
        return Ok(value.bind(py).clone());
    }
    let value = py.import(module)?.getattr(name)?.unbind();
    Ok(cell.get_or_init(py, || value).bind(py).clone())
}

pub fn topic_partition<'py>(
    py: Python<'py>,
    topic: &str,
    partition: i32,
) -> PyResult<Bound<'py, PyAny>> {
    cached(py, &TOPIC_PARTITION, "kctl.model", "TopicPartition")?.call1((topic, partition))
}

pub fn leader_and_isr_to_py<'py>(
    py: Python<'py>,
    lai: &LeaderAndIsr,
) -> PyResult<Bound<'py, PyAny>> {
    let isr = PyTuple::new(py, &lai.isr)?;
    let recovery = cached(py, &RECOVERY_STATE, "kctl.model", "LeaderRecoveryState")?
        .call1((lai.recovery as u8,))?;
    cached(py, &LEADER_AND_ISR, "kctl.model", "LeaderAndIsr")?.call1((
        lai.leader,
        isr,
        lai.leader_epoch,
        lai.partition_epoch,
        recovery,
    ))
}

pub fn lice_to_py<'py>(
    py: Python<'py>,
    lice: &LeaderIsrAndControllerEpoch,
) -> PyResult<Bound<'py, PyAny>> {
    let lai = leader_and_isr_to_py(py, &lice.leader_and_isr)?;
    cached(py, &LICE, "kctl.model", "LeaderIsrAndControllerEpoch")?
        .call1((lai, lice.controller_epoch))
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
pub type LiceTuple = (BrokerId, Brokers, i32, i32, u8, i32);

pub fn lice_from_tuple(t: LiceTuple) -> LeaderIsrAndControllerEpoch {
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

pub fn lice_to_tuple(l: &LeaderIsrAndControllerEpoch) -> LiceTuple {
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

pub fn lice_from_py(obj: &Bound<'_, PyAny>) -> PyResult<LeaderIsrAndControllerEpoch> {
    Ok(LeaderIsrAndControllerEpoch {
        leader_and_isr: leader_and_isr_from_py(&obj.getattr("leader_and_isr")?)?,
        controller_epoch: obj.getattr("controller_epoch")?.extract()?,
    })
}

fn is_instance(py: Python<'_>, value: &Bound<'_, PyAny>, name: &str) -> bool {
    py.import("kctl.errors")
        .and_then(|m| m.getattr(name))
        .and_then(|cls| value.is_instance(&cls))
        .unwrap_or(false)
}

/// A Python exception object as a failure, keeping the object itself.
pub fn failure_from_exception(py: Python<'_>, value: &Bound<'_, PyAny>) -> Failure {
    let kind = [
        ("ControllerMovedError", FailureKind::ControllerMoved),
        ("NoNodeError", FailureKind::NoNode),
        ("StateChangeFailedError", FailureKind::StateChangeFailed),
        ("IllegalStateError", FailureKind::IllegalState),
        ("PluginError", FailureKind::Plugin),
    ]
    .into_iter()
    .find(|(name, _)| is_instance(py, value, name))
    .map_or(FailureKind::Other, |(_, kind)| kind);
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
        store_error: is_instance(py, value, "StoreError"),
        payload: Some(std::sync::Arc::new(payload)),
    }
}

pub fn failure_from_err(py: Python<'_>, err: &PyErr) -> Failure {
    failure_from_exception(py, err.value(py).as_any())
}

/// The Python exception a failure stands for: the original object when there is one, otherwise a
/// new instance of the `kctl.errors` class it names.
pub fn failure_to_py<'py>(py: Python<'py>, failure: &Failure) -> PyResult<Bound<'py, PyAny>> {
    if let Some(payload) = &failure.payload {
        if let Some(obj) = payload.downcast_ref::<Py<PyAny>>() {
            return Ok(obj.bind(py).clone());
        }
    }
    let errors = py.import("kctl.errors")?;
    let cls = errors
        .getattr(failure.type_name.as_str())
        .or_else(|_| errors.getattr("KctlError"))?;
    cls.call1((failure.message.as_str(),))
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
