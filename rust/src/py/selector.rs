//! Plugin leader selectors: the engine hands a Python selector one whole batch per election round
//! (through `kctl.native.selection.select`, which validates the answers as the reference does).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::context::Context;
use crate::election::Pick;
use crate::model::NO_LEADER;
use crate::py::convert::{failure_from_err, failure_from_exception};
use crate::py::store::keys;
use crate::statemachine::{SelectionBatch, Selector};
use crate::store::Failure;

/// A plugin selector, called with the GIL taken once per election batch.
pub struct PySelector {
    /// The `kctl.election.Election` whose selector is a plugin.
    pub election: Py<PyAny>,
}

impl Selector for PySelector {
    fn select(&mut self, ctx: &Context, batch: &SelectionBatch<'_>) -> Result<Vec<Pick>, Failure> {
        Python::attach(|py| self.select_with(py, ctx, batch))
    }
}

impl PySelector {
    fn select_with(
        &self,
        py: Python<'_>,
        ctx: &Context,
        batch: &SelectionBatch<'_>,
    ) -> Result<Vec<Pick>, Failure> {
        let partitions = keys(py, ctx, &batch.parts)?;
        let call = || -> PyResult<Vec<Pick>> {
            let scanned: Vec<Vec<i32>> =
                batch.candidates.iter().map(|c| c.scanned.clone()).collect();
            let allowed: Vec<Vec<i32>> =
                batch.candidates.iter().map(|c| c.allowed.clone()).collect();
            let unclean: Vec<bool> = batch.candidates.iter().map(|c| c.unclean).collect();
            let isrs: Vec<Vec<i32>> = batch.isrs.iter().map(|isr| isr.to_vec()).collect();
            let counts = PyDict::new(py);
            for (broker, count) in ctx.leader_counts() {
                counts.set_item(broker, count)?;
            }
            let picks = py
                .import("kctl.native.selection")?
                .getattr("select")?
                .call1((
                    self.election.bind(py),
                    partitions,
                    scanned,
                    isrs,
                    allowed,
                    unclean,
                    counts,
                ))?;
            picks
                .try_iter()?
                .map(|pick| {
                    let pick = pick?;
                    Ok(match pick.extract::<i32>() {
                        Ok(NO_LEADER) => Pick::NoLeader,
                        Ok(leader) => Pick::Leader(leader),
                        Err(_) => Pick::Error(failure_from_exception(py, &pick)),
                    })
                })
                .collect()
        };
        call().map_err(|e| failure_from_err(py, &e))
    }
}
