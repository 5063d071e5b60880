//! Binding for `agentgym-trajectory`: the token-in/token-out trajectory builder.
//!
//! Converts types and maps errors only. Messages and tool schemas cross as JSON strings (the
//! typed wrapper `agentgym_rl.trajectory` serializes them); rendering, encoding and the drift
//! check run with the GIL released; finished arrays go to numpy without a copy.
use std::sync::Arc;

use agentgym_trajectory::{
    Appended, BuilderConfig, ChatTokenizer, DriftReport, Error, Message, Prompt, SpecialTokens,
    Trajectory, TrajectoryBuilder, Versions,
};
use numpy::PyArray1;
use pyo3::create_exception;
use pyo3::prelude::*;

use crate::conversion::to_numpy;
use crate::errors::AgentGymError;

create_exception!(
    _core,
    TrajectoryError,
    AgentGymError,
    "Base class of trajectory-builder errors."
);

/// Declares one exception per `agentgym_trajectory::Error` variant and their registration.
macro_rules! variant_exceptions {
    ($($name:ident: $doc:literal),* $(,)?) => {
        $(create_exception!(_core, $name, TrajectoryError, $doc);)*

        fn register_exceptions(m: &Bound<'_, PyModule>) -> PyResult<()> {
            m.add("TrajectoryError", m.py().get_type::<TrajectoryError>())?;
            $(m.add(stringify!($name), m.py().get_type::<$name>())?;)*
            Ok(())
        }
    };
}

variant_exceptions! {
    TokenizerLoadError: "tokenizer.json could not be loaded.",
    ChatConfigError: "No chat template, or a malformed tokenizer_config.json.",
    TemplateSyntaxError: "The chat template does not parse.",
    TemplateRenderError: "The chat template failed to render (raise_exception included).",
    TokenizeError: "The tokenizer failed to encode or decode.",
    PlaceholderNotFoundError: "The template does not render assistant content verbatim.",
    BaseNotPrefixError: "The template is not append-only: no observation delta exists.",
    DriftError: "Strict mode: the built ids differ from a full render.",
    TrajectoryInputError: "Inconsistent input (lengths, empty turn, order, bad JSON).",
}

fn to_py(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::TokenizerLoad { .. } => TokenizerLoadError::new_err(msg),
        Error::Config(_) => ChatConfigError::new_err(msg),
        Error::TemplateSyntax(_) => TemplateSyntaxError::new_err(msg),
        Error::TemplateRender(_) => TemplateRenderError::new_err(msg),
        Error::Tokenize(_) => TokenizeError::new_err(msg),
        Error::PlaceholderNotFound => PlaceholderNotFoundError::new_err(msg),
        Error::BaseNotPrefix { .. } => BaseNotPrefixError::new_err(msg),
        Error::Drift { .. } => DriftError::new_err(msg),
        Error::InvalidInput(_) => TrajectoryInputError::new_err(msg),
        _ => TrajectoryError::new_err(msg),
    }
}

fn parse_messages(text: &str) -> PyResult<Vec<Message>> {
    agentgym_trajectory::messages_from_json(text).map_err(to_py)
}

fn parse_tools(text: Option<&str>) -> PyResult<Option<Message>> {
    text.map(agentgym_trajectory::value_from_json)
        .transpose()
        .map_err(to_py)
}

#[pyclass(module = "agentgym_rl._core", name = "ChatTokenizer", frozen)]
pub(crate) struct PyChatTokenizer(Arc<ChatTokenizer>);

#[pymethods]
impl PyChatTokenizer {
    #[staticmethod]
    fn from_dir(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        py.detach(|| ChatTokenizer::from_dir(path))
            .map(|c| Self(Arc::new(c)))
            .map_err(to_py)
    }
    #[staticmethod]
    #[pyo3(signature = (tokenizer_json, chat_template, special_tokens=None))]
    fn from_parts(
        py: Python<'_>,
        tokenizer_json: std::path::PathBuf,
        chat_template: &str,
        special_tokens: Option<std::collections::BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let special = special_tokens
            .unwrap_or_default()
            .iter()
            .fold(SpecialTokens::new(), |s, (k, v)| s.with(k, v));
        py.detach(|| ChatTokenizer::from_parts(tokenizer_json, chat_template, special))
            .map(|c| Self(Arc::new(c)))
            .map_err(to_py)
    }
    #[pyo3(signature = (messages_json, *, add_generation_prompt=false, tools_json=None))]
    fn render(
        &self,
        py: Python<'_>,
        messages_json: &str,
        add_generation_prompt: bool,
        tools_json: Option<&str>,
    ) -> PyResult<String> {
        let (messages, tools) = (parse_messages(messages_json)?, parse_tools(tools_json)?);
        py.detach(|| {
            self.0
                .render(&messages, tools.as_ref(), add_generation_prompt)
        })
        .map_err(to_py)
    }
    #[pyo3(signature = (messages_json, *, add_generation_prompt=false, tools_json=None))]
    fn apply_chat_template<'py>(
        &self,
        py: Python<'py>,
        messages_json: &str,
        add_generation_prompt: bool,
        tools_json: Option<&str>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let (messages, tools) = (parse_messages(messages_json)?, parse_tools(tools_json)?);
        let ids = py.detach(|| {
            self.0
                .apply_chat_template(&messages, tools.as_ref(), add_generation_prompt)
        });
        Ok(to_numpy(py, ids.map_err(to_py)?))
    }
    fn encode<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let ids = py.detach(|| self.0.encode(text)).map_err(to_py)?;
        Ok(to_numpy(py, ids))
    }
    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        py.detach(|| self.0.decode(&ids)).map_err(to_py)
    }
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.0.token_to_id(token)
    }
    #[getter]
    fn eos_token_id(&self) -> Option<u32> {
        self.0.eos_token_id()
    }
    #[getter]
    fn drift_count(&self) -> u64 {
        self.0.drift_count()
    }
    #[getter]
    fn checked_count(&self) -> u64 {
        self.0.checked_count()
    }
    #[pyo3(signature = (messages_json, tools_json=None))]
    fn prompt(
        &self,
        py: Python<'_>,
        messages_json: &str,
        tools_json: Option<&str>,
    ) -> PyResult<PyPrompt> {
        let (messages, tools) = (parse_messages(messages_json)?, parse_tools(tools_json)?);
        py.detach(|| Prompt::new(&self.0, messages, tools))
            .map(|p| PyPrompt(Arc::new(p)))
            .map_err(to_py)
    }
}

/// An episode's rendered, tokenized prefix; shareable by all samples of a group.
#[pyclass(module = "agentgym_rl._core", name = "Prompt", frozen)]
pub(crate) struct PyPrompt(Arc<Prompt>);

#[pymethods]
impl PyPrompt {
    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        to_numpy(py, self.0.ids().to_vec())
    }
    #[getter]
    fn closing(&self) -> &str {
        self.0.closing()
    }
    fn __len__(&self) -> usize {
        self.0.ids().len()
    }
}

#[pyclass(module = "agentgym_rl._core", name = "DriftReport", frozen, get_all)]
pub(crate) struct PyDriftReport {
    offset: Option<usize>,
    expected: String,
    actual: String,
}

#[pymethods]
impl PyDriftReport {
    #[getter]
    fn clean(&self) -> bool {
        self.offset.is_none()
    }
}

impl From<DriftReport> for PyDriftReport {
    fn from(r: DriftReport) -> Self {
        PyDriftReport {
            offset: r.offset,
            expected: r.expected,
            actual: r.actual,
        }
    }
}

/// Finished arrays, owned by numpy.
#[pyclass(module = "agentgym_rl._core", name = "Trajectory", frozen, get_all)]
pub(crate) struct PyTrajectory {
    input_ids: Py<PyArray1<u32>>,
    loss_mask: Py<PyArray1<u8>>,
    logprobs: Py<PyArray1<f32>>,
    versions: Py<PyArray1<u32>>,
    turn_spans: Py<PyArray1<u32>>,
    truncated: bool,
    drift: bool,
    turns: u32,
    prompt_len: usize,
}

#[pymethods]
impl PyTrajectory {
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.input_ids.bind(py).len()
    }
}

impl PyTrajectory {
    fn new(py: Python<'_>, t: Trajectory) -> Self {
        let tok = t.tokens;
        PyTrajectory {
            input_ids: to_numpy(py, tok.input_ids).unbind(),
            loss_mask: to_numpy(py, tok.loss_mask).unbind(),
            logprobs: to_numpy(py, tok.logprobs).unbind(),
            versions: to_numpy(py, tok.versions).unbind(),
            turn_spans: to_numpy(py, tok.turn_spans).unbind(),
            truncated: t.truncated,
            drift: t.drift,
            turns: t.turns,
            prompt_len: t.prompt_len,
        }
    }
}

#[derive(FromPyObject)]
enum PyVersions {
    Uniform(u32),
    PerToken(Vec<u32>),
}

#[pyclass(module = "agentgym_rl._core", name = "TrajectoryBuilder")]
pub(crate) struct PyTrajectoryBuilder(Option<TrajectoryBuilder>);

impl PyTrajectoryBuilder {
    fn get(&self) -> PyResult<&TrajectoryBuilder> {
        self.0
            .as_ref()
            .ok_or_else(|| TrajectoryInputError::new_err("the builder is finished"))
    }
    fn get_mut(&mut self) -> PyResult<&mut TrajectoryBuilder> {
        self.0
            .as_mut()
            .ok_or_else(|| TrajectoryInputError::new_err("the builder is finished"))
    }
}

#[pymethods]
impl PyTrajectoryBuilder {
    #[new]
    #[pyo3(signature = (chat, prompt, *, max_len=32768, stop_ids=None, check_drift=true, strict=false, prompt_version=0))]
    fn new(
        chat: &PyChatTokenizer,
        prompt: &PyPrompt,
        max_len: usize,
        stop_ids: Option<Vec<u32>>,
        check_drift: bool,
        strict: bool,
        prompt_version: u32,
    ) -> PyResult<Self> {
        let config = BuilderConfig {
            max_len,
            stop_ids,
            check_drift,
            strict,
            prompt_version,
        };
        TrajectoryBuilder::new(chat.0.clone(), prompt.0.clone(), config)
            .map(|b| Self(Some(b)))
            .map_err(to_py)
    }
    /// Returns False when the turn did not fit (the trajectory is then truncated and final).
    fn add_generated(
        &mut self,
        py: Python<'_>,
        ids: Vec<u32>,
        logprobs: Vec<f32>,
        version: PyVersions,
    ) -> PyResult<bool> {
        let b = self.get_mut()?;
        let versions = match &version {
            PyVersions::Uniform(v) => Versions::Uniform(*v),
            PyVersions::PerToken(v) => Versions::PerToken(v),
        };
        let out = py
            .detach(|| b.add_generated(&ids, &logprobs, versions))
            .map_err(to_py)?;
        Ok(out == Appended::Appended)
    }
    /// Returns False when the observation did not fit (the trajectory is then truncated).
    fn add_observation(&mut self, py: Python<'_>, messages_json: &str) -> PyResult<bool> {
        let messages = parse_messages(messages_json)?;
        let b = self.get_mut()?;
        let out = py.detach(|| b.add_observation(&messages)).map_err(to_py)?;
        Ok(out == Appended::Appended)
    }
    fn check_drift(&self, py: Python<'_>) -> PyResult<PyDriftReport> {
        let b = self.get()?;
        py.detach(|| b.check_drift())
            .map(PyDriftReport::from)
            .map_err(to_py)
    }
    /// Run the drift check (if enabled) and hand over the arrays; the builder is then spent.
    fn finish(&mut self, py: Python<'_>) -> PyResult<PyTrajectory> {
        let b = self
            .0
            .take()
            .ok_or_else(|| TrajectoryInputError::new_err("the builder is finished"))?;
        let t = py.detach(|| b.finish()).map_err(to_py)?;
        Ok(PyTrajectory::new(py, t))
    }
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.get()?.len())
    }
    /// The token ids built so far (prompt, generated turns, observation deltas): what the
    /// engine continues next.
    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        Ok(to_numpy(py, self.get()?.tokens().input_ids.clone()))
    }
    #[getter]
    fn remaining(&self) -> PyResult<usize> {
        Ok(self.get()?.remaining())
    }
    #[getter]
    fn truncated(&self) -> PyResult<bool> {
        Ok(self.get()?.is_truncated())
    }
    #[getter]
    fn turns(&self) -> PyResult<u32> {
        Ok(self.get()?.turns())
    }
    #[getter]
    fn expects_generation(&self) -> PyResult<bool> {
        Ok(self.get()?.expects_generation())
    }
    #[getter]
    fn stop_ids(&self) -> PyResult<Vec<u32>> {
        Ok(self.get()?.stop_ids().to_vec())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyChatTokenizer>()?;
    m.add_class::<PyPrompt>()?;
    m.add_class::<PyTrajectoryBuilder>()?;
    m.add_class::<PyTrajectory>()?;
    m.add_class::<PyDriftReport>()?;
    register_exceptions(m)
}
