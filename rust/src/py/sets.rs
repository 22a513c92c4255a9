//! Opaque collections handed to Python: partition and replica sets and state-machine results stay
//! native until someone looks inside, so a bulk operation can pass them from one engine call to the
//! next without building a Python object per partition.

use std::borrow::Cow;

use pyo3::prelude::*;

use crate::context::{Part, Replica};
use crate::model::LeaderAndIsr;
use crate::statemachine::{Level, Line};
use crate::store::Failure;

/// Partitions of one engine, in context order.
#[pyclass(frozen, module = "kctl._engine")]
pub struct Parts {
    pub parts: Vec<Part>,
    /// The engine the indices belong to (its address).
    pub owner: usize,
}

#[pymethods]
impl Parts {
    fn __len__(&self) -> usize {
        self.parts.len()
    }
}

/// Replicas `(partition, broker)` of one engine.
#[pyclass(frozen, module = "kctl._engine")]
pub struct Replicas {
    pub items: Vec<Replica>,
    pub owner: usize,
}

#[pymethods]
impl Replicas {
    fn __len__(&self) -> usize {
        self.items.len()
    }
}

/// What a state-machine call decided per partition (or per replica, with its broker).
pub enum Outcome {
    Elected(LeaderAndIsr),
    State(u8),
    Failed(Failure),
}

#[pyclass(frozen, module = "kctl._engine")]
pub struct Outcomes {
    pub items: Vec<(Replica, Outcome)>,
    pub owner: usize,
}

#[pymethods]
impl Outcomes {
    fn __len__(&self) -> usize {
        self.items.len()
    }
}

/// The state-change lines of one call, in order, made text only by [`StateChangeLines::made`]: a
/// caller holding its lines until after its writes (`StateChangeLogger.log_later`) makes them
/// then.
#[pyclass(frozen, module = "kctl._engine")]
pub struct StateChangeLines {
    pub lines: Vec<Line>,
}

#[pymethods]
impl StateChangeLines {
    fn __len__(&self) -> usize {
        self.lines.len()
    }

    /// `(logging level, from the request batch, text)` per line.
    fn made(&self) -> Vec<(u8, bool, Cow<'_, str>)> {
        self.lines
            .iter()
            .map(|l| (level_code(l.level), l.from_batch, l.text.made()))
            .collect()
    }
}

/// Python's logging level of a line's (TRACE is 5, as `kctl.statechange.TRACE`).
fn level_code(level: Level) -> u8 {
    match level {
        Level::Trace => 5,
        Level::Info => 20,
        Level::Error => 40,
    }
}
