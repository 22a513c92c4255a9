//! The engine's view of a Python `StateStore`: one Python call per bulk operation, converting keys
//! and states at the boundary. (Per-partition Python objects are unavoidable here: the store itself
//! is Python.)

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::context::{Context, Part, TopicIdx};
use crate::model::{LeaderAndIsr, LeaderIsrAndControllerEpoch};
use crate::py::convert::{
    failure_from_err, failure_from_exception, leader_and_isr_from_py, leader_and_isr_to_py,
    lice_from_py, lice_to_py, topic_partition,
};
use crate::store::{Failure, Read, Store, Updated};

pub struct PyStore<'py> {
    pub py: Python<'py>,
    pub store: Bound<'py, PyAny>,
}

impl<'py> PyStore<'py> {
    fn keys(&self, ctx: &Context, parts: &[Part]) -> Result<Vec<Bound<'py, PyAny>>, Failure> {
        parts
            .iter()
            .map(|p| {
                topic_partition(
                    self.py,
                    ctx.topic_name(ctx.partition_topic(*p)),
                    ctx.partition_id(*p),
                )
            })
            .collect::<PyResult<_>>()
            .map_err(|e| failure_from_err(self.py, &e))
    }

    fn fail(&self, e: PyErr) -> Failure {
        failure_from_err(self.py, &e)
    }

    fn part_of(ctx: &Context, key: &Bound<'_, PyAny>) -> PyResult<Part> {
        let (topic, partition): (String, i32) = key.extract()?;
        ctx.part(&topic, partition)
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("{topic}-{partition}")))
    }
}

impl Store for PyStore<'_> {
    fn read_states(&mut self, ctx: &Context, parts: &[Part]) -> Result<Vec<Read>, Failure> {
        let keys = self.keys(ctx, parts)?;
        let result = self
            .store
            .call_method1(
                "get_partition_states",
                (PyList::new(self.py, &keys).map_err(|e| self.fail(e))?,),
            )
            .map_err(|e| self.fail(e))?;
        let (values, errors) = (|| -> PyResult<(Bound<'_, PyDict>, Bound<'_, PyDict>)> {
            Ok((
                result.getattr("values")?.cast_into()?,
                result.getattr("errors")?.cast_into()?,
            ))
        })()
        .map_err(|e| self.fail(e))?;
        let mut reads = Vec::with_capacity(parts.len());
        for key in &keys {
            if let Some(value) = values.get_item(key).map_err(|e| self.fail(e))? {
                reads.push(Read::Found(lice_from_py(&value).map_err(|e| self.fail(e))?));
                continue;
            }
            match errors.get_item(key).map_err(|e| self.fail(e))? {
                Some(error) => {
                    let failure = failure_from_exception(self.py, &error);
                    if failure.kind == crate::store::FailureKind::NoNode {
                        reads.push(Read::Missing);
                    } else {
                        reads.push(Read::Failed(failure));
                    }
                }
                None => reads.push(Read::Missing),
            }
        }
        Ok(reads)
    }

    fn create_states(
        &mut self,
        ctx: &Context,
        states: &[(Part, LeaderIsrAndControllerEpoch)],
        fence: i32,
    ) -> Result<Vec<Option<Failure>>, Failure> {
        let parts: Vec<Part> = states.iter().map(|(p, _)| *p).collect();
        let keys = self.keys(ctx, &parts)?;
        let mapping = PyDict::new(self.py);
        for (key, (_, lice)) in keys.iter().zip(states) {
            let value = lice_to_py(self.py, lice).map_err(|e| self.fail(e))?;
            mapping.set_item(key, value).map_err(|e| self.fail(e))?;
        }
        let responses = self
            .store
            .call_method1("create_partition_states", (mapping, fence))
            .map_err(|e| self.fail(e))?;
        keys.iter()
            .map(|key| {
                let error = responses
                    .call_method1("get", (key,))
                    .map_err(|e| self.fail(e))?;
                Ok(if error.is_none() {
                    None
                } else {
                    Some(failure_from_exception(self.py, &error))
                })
            })
            .collect()
    }

    fn update_states(
        &mut self,
        ctx: &Context,
        updates: &[(Part, LeaderAndIsr)],
        controller_epoch: i32,
        fence: i32,
    ) -> Result<Updated, Failure> {
        let parts: Vec<Part> = updates.iter().map(|(p, _)| *p).collect();
        let keys = self.keys(ctx, &parts)?;
        let mapping = PyDict::new(self.py);
        for (key, (_, lai)) in keys.iter().zip(updates) {
            let value = leader_and_isr_to_py(self.py, lai).map_err(|e| self.fail(e))?;
            mapping.set_item(key, value).map_err(|e| self.fail(e))?;
        }
        let outcome = self
            .store
            .call_method1(
                "update_partition_states",
                (mapping, controller_epoch, fence),
            )
            .map_err(|e| self.fail(e))?;
        let convert = || -> PyResult<Updated> {
            let mut updated = Updated::default();
            let successful: Bound<'_, PyDict> = outcome.getattr("successful")?.cast_into()?;
            for (key, value) in successful.iter() {
                updated
                    .successful
                    .push((Self::part_of(ctx, &key)?, leader_and_isr_from_py(&value)?));
            }
            for key in outcome.getattr("to_retry")?.try_iter()? {
                updated.to_retry.push(Self::part_of(ctx, &key?)?);
            }
            let failed: Bound<'_, PyDict> = outcome.getattr("failed")?.cast_into()?;
            for (key, value) in failed.iter() {
                updated.failed.push((
                    Self::part_of(ctx, &key)?,
                    failure_from_exception(self.py, &value),
                ));
            }
            Ok(updated)
        };
        convert().map_err(|e| self.fail(e))
    }

    fn unclean_overrides(
        &mut self,
        ctx: &Context,
        topics: &[TopicIdx],
    ) -> Result<Vec<Result<Option<String>, Failure>>, Failure> {
        let names: Vec<&str> = topics.iter().map(|t| ctx.topic_name(*t)).collect();
        let read = self
            .store
            .call_method1("get_topic_configs", (names.clone(),))
            .map_err(|e| self.fail(e))?;
        let convert = || -> PyResult<Vec<Result<Option<String>, Failure>>> {
            let values: Bound<'_, PyDict> = read.getattr("values")?.cast_into()?;
            let errors: Bound<'_, PyDict> = read.getattr("errors")?.cast_into()?;
            let mut out = Vec::with_capacity(names.len());
            for name in &names {
                if let Some(error) = errors.get_item(name)? {
                    out.push(Err(failure_from_exception(self.py, &error)));
                    continue;
                }
                let value = match values.get_item(name)? {
                    Some(config) => {
                        config.call_method1("get", ("unclean.leader.election.enable",))?
                    }
                    None => self.py.None().into_bound(self.py),
                };
                out.push(Ok(if value.is_none() {
                    None
                } else {
                    Some(value.str()?.to_string())
                }));
            }
            Ok(out)
        };
        convert().map_err(|e| self.fail(e))
    }
}
