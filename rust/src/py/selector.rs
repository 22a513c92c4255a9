//! Plugin leader selectors: the engine hands a Python selector one whole batch per election round
//! (through the `select` of the selection object the call passes, a
//! `kctl.native.selection.NativeSelection`) as flat int32 buffers, with the brokers' table its
//! cluster view needs, and checks the answers natively (asking the object's `refusal` for the
//! error of a refused answer).

use pyo3::exceptions::{PyBaseException, PyOverflowError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt};

use crate::context::{Context, TopicIdx};
use crate::election::Pick;
use crate::hash::HashMap;
use crate::model::{BrokerId, NO_LEADER};
use crate::py::convert::{attached, failure_from_exception};
use crate::statemachine::{SelectionBatch, Selector};
use crate::store::Failure;

/// A plugin selector, called with the GIL taken once per election batch.
pub struct PySelector {
    /// The election's selection object (`select`, `refusal`), passed with the call.
    pub selection: Py<PyAny>,
}

impl Selector for PySelector {
    fn select(&mut self, ctx: &Context, batch: &SelectionBatch<'_>) -> Result<Vec<Pick>, Failure> {
        attached(|py| self.select_with(py, ctx, batch))
    }
}

/// Native-endian int32s, as `kctl.columns.int32_buffer` reads them.
fn int32_bytes(py: Python<'_>, values: impl Iterator<Item = i32>) -> Bound<'_, PyBytes> {
    let bytes: Vec<u8> = values.flat_map(i32::to_ne_bytes).collect();
    PyBytes::new(py, &bytes)
}

/// A column of rows as `kctl.columns.IntRows` reads it: offsets (one more than rows), values.
fn rows<'py, 'a>(
    py: Python<'py>,
    rows: impl ExactSizeIterator<Item = &'a [BrokerId]>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let mut offsets = Vec::with_capacity(rows.len() + 1);
    let mut values = Vec::new();
    offsets.push(0);
    for row in rows {
        values.extend_from_slice(row);
        let end = i32::try_from(values.len()).map_err(|_| {
            PyOverflowError::new_err("an election batch of more than 2^31 replicas")
        })?;
        offsets.push(end);
    }
    Ok((
        int32_bytes(py, offsets.into_iter()),
        int32_bytes(py, values.into_iter()),
    ))
}

impl PySelector {
    fn select_with(
        &self,
        py: Python<'_>,
        ctx: &Context,
        batch: &SelectionBatch<'_>,
    ) -> PyResult<Vec<Pick>> {
        let mut topics: Vec<&str> = Vec::new();
        let mut position: HashMap<TopicIdx, i32> = HashMap::default();
        let mut topic_index = Vec::with_capacity(batch.parts.len());
        for &p in &batch.parts {
            let t = ctx.partition_topic(p);
            let at = *position.entry(t).or_insert_with(|| {
                topics.push(ctx.topic_name(t));
                i32::try_from(topics.len() - 1).unwrap_or(i32::MAX)
            });
            topic_index.push(at);
        }
        let columns = (
            topics,
            int32_bytes(py, topic_index.into_iter()),
            int32_bytes(py, batch.parts.iter().map(|p| ctx.partition_id(*p))),
            rows(py, batch.candidates.iter().map(|c| c.scanned.as_slice()))?,
            rows(py, batch.isrs.iter().copied())?,
            rows(py, batch.candidates.iter().map(|c| c.allowed.as_slice()))?,
            PyBytes::new(
                py,
                &batch
                    .candidates
                    .iter()
                    .map(|c| u8::from(c.unclean))
                    .collect::<Vec<u8>>(),
            ),
        );
        let brokers = (
            ctx.epoch,
            ctx.live_broker_epochs(),
            ctx.shutting_down_broker_ids(),
            ctx.leader_counts(),
            ctx.replica_counts(),
        );
        let selection = self.selection.bind(py);
        let (built, answers): (Bound<'_, PyAny>, Bound<'_, PyAny>) = selection
            .call_method1("select", (columns, brokers))?
            .extract()?;
        if answers.is_instance_of::<PyBaseException>() {
            let failure = failure_from_exception(py, &answers);
            return Ok(vec![Pick::Error(failure); batch.parts.len()]);
        }
        answers
            .try_iter()?
            .zip(&batch.candidates)
            .enumerate()
            .map(|(i, (answer, candidates))| {
                let answer = answer?;
                // An int (not a bool) that fits a broker id; anything else is refused below.
                let leader = if answer.is_instance_of::<PyBool>() {
                    None
                } else {
                    answer
                        .cast::<PyInt>()
                        .ok()
                        .and_then(|n| n.extract::<BrokerId>().ok())
                };
                Ok(match leader {
                    Some(NO_LEADER) => Pick::NoLeader,
                    Some(leader) if candidates.allowed.contains(&leader) => Pick::Leader(leader),
                    _ => {
                        let refusal = selection.call_method1("refusal", (&built, i, &answer))?;
                        Pick::Error(failure_from_exception(py, &refusal))
                    }
                })
            })
            .collect()
    }
}
