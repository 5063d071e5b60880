//! Binding for `agentgym-buffer`: the staleness-controlled trajectory buffer.
use std::collections::HashMap;

use agentgym_buffer::{AddOutcome, AdmissionConfig, BufferError, TrajectoryBuffer};
use pyo3::create_exception;
use pyo3::prelude::*;

use crate::carriers::{PyGroup, PySample};
use crate::errors::AgentGymError;

create_exception!(
    _core,
    BufferStateError,
    AgentGymError,
    "Base class of trajectory-buffer errors."
);
create_exception!(
    _core,
    BufferConfigError,
    BufferStateError,
    "A buffer setting is out of range."
);
create_exception!(
    _core,
    UnknownGroupError,
    BufferStateError,
    "The group was never admitted or is already complete."
);
create_exception!(
    _core,
    VersionRegressionError,
    BufferStateError,
    "Policy versions only move forward."
);

fn to_py(err: BufferError) -> PyErr {
    let msg = err.to_string();
    match err {
        BufferError::InvalidConfig { .. } => BufferConfigError::new_err(msg),
        BufferError::UnknownGroup(_) => UnknownGroupError::new_err(msg),
        BufferError::VersionRegression { .. } => VersionRegressionError::new_err(msg),
        _ => BufferStateError::new_err(msg),
    }
}

/// Permission to run one group.
#[pyclass(module = "agentgym_rl._core", name = "Ticket", frozen, get_all)]
pub(crate) struct PyTicket {
    group_id: u64,
    dispatch_version: u32,
}

#[pyclass(module = "agentgym_rl._core", name = "TrajectoryBuffer")]
pub(crate) struct PyTrajectoryBuffer(TrajectoryBuffer);

#[pymethods]
impl PyTrajectoryBuffer {
    #[new]
    #[pyo3(signature = (*, group_size, groups_per_step, max_staleness, max_in_flight, max_ready,
        filter_zero_variance=false, start_version=0, first_group_id=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        group_size: usize,
        groups_per_step: usize,
        max_staleness: u32,
        max_in_flight: usize,
        max_ready: usize,
        filter_zero_variance: bool,
        start_version: u32,
        first_group_id: u64,
    ) -> PyResult<Self> {
        let config = AdmissionConfig {
            group_size,
            groups_per_step,
            max_staleness,
            max_in_flight,
            max_ready,
            filter_zero_variance,
        };
        TrajectoryBuffer::new(config)
            .map(|b| Self(b.starting_at(start_version, first_group_id)))
            .map_err(to_py)
    }

    #[getter]
    fn version(&self) -> u32 {
        self.0.version()
    }
    #[getter]
    fn group_size(&self) -> usize {
        self.0.config().group_size
    }
    #[getter]
    fn groups_per_step(&self) -> usize {
        self.0.config().groups_per_step
    }
    #[getter]
    fn max_in_flight(&self) -> usize {
        self.0.config().max_in_flight
    }
    #[setter]
    fn set_max_in_flight(&mut self, max_in_flight: usize) -> PyResult<()> {
        self.0.set_max_in_flight(max_in_flight).map_err(to_py)
    }
    fn capacity(&self) -> usize {
        self.0.capacity()
    }
    fn try_admit(&mut self, task_id: &str, env: &str) -> Option<PyTicket> {
        self.0.try_admit(task_id, env).map(|t| PyTicket {
            group_id: t.group_id,
            dispatch_version: t.dispatch_version,
        })
    }
    /// Returns "pending", "ready" or "filtered".
    fn add_sample(&mut self, group_id: u64, sample: &PySample) -> PyResult<&'static str> {
        let outcome = self
            .0
            .add_sample(group_id, sample.0.clone())
            .map_err(to_py)?;
        Ok(outcome_name(outcome))
    }
    /// One episode as several samples; returns "pending", "ready" or "filtered".
    fn add_episode(
        &mut self,
        group_id: u64,
        samples: Vec<PyRef<'_, PySample>>,
    ) -> PyResult<&'static str> {
        let samples = samples.iter().map(|s| s.0.clone()).collect();
        let outcome = self.0.add_episode(group_id, samples).map_err(to_py)?;
        Ok(outcome_name(outcome))
    }
    fn abort_group(&mut self, group_id: u64) -> PyResult<usize> {
        self.0.abort_group(group_id).map_err(to_py)
    }
    fn set_version(&mut self, version: u32) -> PyResult<()> {
        self.0.set_version(version).map_err(to_py)
    }
    fn pop_ready(&mut self) -> Option<PyGroup> {
        self.0.pop_ready().map(PyGroup)
    }
    fn requeue_front(&mut self, group: &PyGroup) {
        self.0.requeue_front(group.0.clone());
    }
    fn counters(&self) -> HashMap<&'static str, usize> {
        let c = self.0.counters();
        HashMap::from([
            ("admitted", c.admitted),
            ("running", c.running),
            ("ready", c.ready),
            ("released", c.released),
            ("filtered", c.filtered),
            ("stale", c.stale),
            ("aborted", c.aborted),
            ("accepted", c.accepted),
            ("samples", c.samples),
            ("env_failures", c.env_failures),
        ])
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTicket>()?;
    m.add_class::<PyTrajectoryBuffer>()?;
    let py = m.py();
    m.add("BufferStateError", py.get_type::<BufferStateError>())?;
    m.add("BufferConfigError", py.get_type::<BufferConfigError>())?;
    m.add("UnknownGroupError", py.get_type::<UnknownGroupError>())?;
    m.add(
        "VersionRegressionError",
        py.get_type::<VersionRegressionError>(),
    )?;
    Ok(())
}

fn outcome_name(outcome: AddOutcome) -> &'static str {
    match outcome {
        AddOutcome::Pending { .. } => "pending",
        AddOutcome::Ready => "ready",
        AddOutcome::Filtered => "filtered",
    }
}
