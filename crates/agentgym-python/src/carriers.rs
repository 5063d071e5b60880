//! Python views of the trajectory carriers (`agentgym_wire::{Sample, Group}`).
//!
//! Rust owns the data; arrays are handed to numpy on access. Construction from numpy runs
//! `Sample::validate` (agentgym-wire's checks, the same the codec runs) and raises `SampleError`,
//! so a malformed sample never reaches the buffer or the wire.
use agentgym_wire::{Group, Sample, Status, TokenArrays, WireError};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::conversion::to_numpy;
use crate::errors::AgentGymError;

create_exception!(
    _core,
    SampleError,
    AgentGymError,
    "A sample's arrays do not line up, or a field is out of range."
);

/// Any `WireError` raised while building a `Sample` from Python is a `SampleError`.
fn sample_error(e: WireError) -> PyErr {
    SampleError::new_err(e.to_string())
}

#[pyclass(module = "agentgym_rl._core", name = "Sample", frozen, from_py_object)]
#[derive(Clone)]
pub(crate) struct PySample(pub(crate) Sample);

#[pymethods]
impl PySample {
    #[new]
    #[pyo3(signature = (input_ids, loss_mask, logprobs, versions, turn_spans, *, reward, status,
        drift=false, turns=0, turn_cap=0, stage=0, dispatch_version=0, request_id="",
        turn_rewards=None, turn_keys=None, episode=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        input_ids: PyReadonlyArray1<'_, u32>,
        loss_mask: PyReadonlyArray1<'_, u8>,
        logprobs: PyReadonlyArray1<'_, f32>,
        versions: PyReadonlyArray1<'_, u32>,
        turn_spans: PyReadonlyArray1<'_, u32>,
        reward: f32,
        status: &str,
        drift: bool,
        turns: u32,
        turn_cap: u32,
        stage: u32,
        dispatch_version: u32,
        request_id: &str,
        turn_rewards: Option<PyReadonlyArray1<'_, f32>>,
        turn_keys: Option<PyReadonlyArray1<'_, u32>>,
        episode: Option<u32>,
    ) -> PyResult<Self> {
        let sample = Sample {
            tokens: TokenArrays {
                input_ids: input_ids.as_array().to_vec(),
                loss_mask: loss_mask.as_array().to_vec(),
                logprobs: logprobs.as_array().to_vec(),
                versions: versions.as_array().to_vec(),
                turn_spans: turn_spans.as_array().to_vec(),
            },
            reward,
            status: Status::parse(status).map_err(sample_error)?,
            drift,
            turns,
            turn_cap,
            stage,
            dispatch_version,
            request_id: request_id.to_owned(),
            turn_rewards: turn_rewards.map_or_else(Vec::new, |a| a.as_array().to_vec()),
            turn_keys: turn_keys.map_or_else(Vec::new, |a| a.as_array().to_vec()),
            episode,
        };
        sample.validate().map_err(sample_error)?;
        Ok(Self(sample))
    }

    #[getter]
    fn input_ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        to_numpy(py, self.0.tokens.input_ids.clone())
    }
    #[getter]
    fn loss_mask<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u8>> {
        to_numpy(py, self.0.tokens.loss_mask.clone())
    }
    #[getter]
    fn logprobs<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        to_numpy(py, self.0.tokens.logprobs.clone())
    }
    #[getter]
    fn versions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        to_numpy(py, self.0.tokens.versions.clone())
    }
    #[getter]
    fn turn_spans<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        to_numpy(py, self.0.tokens.turn_spans.clone())
    }
    #[getter]
    fn reward(&self) -> f32 {
        self.0.reward
    }
    #[getter]
    fn status(&self) -> &'static str {
        self.0.status.as_str()
    }
    #[getter]
    fn drift(&self) -> bool {
        self.0.drift
    }
    #[getter]
    fn truncated(&self) -> bool {
        self.0.truncated()
    }
    #[getter]
    fn env_failure(&self) -> bool {
        self.0.env_failure()
    }
    #[getter]
    fn turns(&self) -> u32 {
        self.0.turns
    }
    #[getter]
    fn turn_cap(&self) -> u32 {
        self.0.turn_cap
    }
    #[getter]
    fn stage(&self) -> u32 {
        self.0.stage
    }
    #[getter]
    fn dispatch_version(&self) -> u32 {
        self.0.dispatch_version
    }
    #[getter]
    fn request_id(&self) -> &str {
        &self.0.request_id
    }
    #[getter]
    fn turn_rewards<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        to_numpy(py, self.0.turn_rewards.clone())
    }
    #[getter]
    fn turn_keys<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        to_numpy(py, self.0.turn_keys.clone())
    }

    #[getter]
    fn episode(&self) -> Option<u32> {
        self.0.episode
    }
    fn __len__(&self) -> usize {
        self.0.tokens.len()
    }
    fn __repr__(&self) -> String {
        format!(
            "Sample(tokens={}, reward={}, status={:?}, turns={})",
            self.0.tokens.len(),
            self.0.reward,
            self.0.status.as_str(),
            self.0.turns
        )
    }
}

#[pyclass(module = "agentgym_rl._core", name = "Group", frozen)]
pub(crate) struct PyGroup(pub(crate) Group);

#[pymethods]
impl PyGroup {
    #[new]
    fn new(group_id: u64, task_id: String, env: String, samples: Vec<PySample>) -> Self {
        Self(Group {
            group_id,
            task_id,
            env,
            samples: samples.into_iter().map(|s| s.0).collect(),
        })
    }
    #[getter]
    fn group_id(&self) -> u64 {
        self.0.group_id
    }
    #[getter]
    fn task_id(&self) -> &str {
        &self.0.task_id
    }
    #[getter]
    fn env(&self) -> &str {
        &self.0.env
    }
    #[getter]
    fn samples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.samples.iter().cloned().map(PySample))
    }
    #[getter]
    fn rewards(&self) -> Vec<f32> {
        self.0.rewards().collect()
    }
    /// The oldest policy version of any generated token (None if nothing was generated).
    fn min_version(&self) -> Option<u32> {
        self.0.min_version()
    }
    fn __len__(&self) -> usize {
        self.0.samples.len()
    }
    fn __repr__(&self) -> String {
        format!(
            "Group(group_id={}, task_id={:?}, samples={})",
            self.0.group_id,
            self.0.task_id,
            self.0.samples.len()
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySample>()?;
    m.add_class::<PyGroup>()?;
    m.add("SampleError", m.py().get_type::<SampleError>())?;
    Ok(())
}
