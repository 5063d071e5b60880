//! Binding for `agentgym-wire`: encode/decode group messages, map `WireError` variants onto
//! Python exceptions. Decoded arrays go to numpy without a copy.
//!
//! `decode_group` returns the `Group` carrier (see `carriers.rs`); `decode_group_dict` returns a
//! plain dict whose arrays are numpy arrays handed over without a copy
//! (`agentgym_rl.wire.Group.from_dict` turns it into dataclasses):
//! `{"v", "group_id", "task_id", "env", "samples": [{"tokens": {"input_ids", "loss_mask",
//! "logprobs", "versions", "turn_spans"}, "reward", "status", "drift", "turns", "turn_cap",
//! "stage", "dispatch_version", "request_id"}]}` (a dict without "request_id" encodes as unnamed).
use agentgym_wire::{Group, Sample, Status, TokenArrays, WireError};
use numpy::{PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::carriers::PyGroup;
use crate::conversion::to_numpy;
use crate::errors::AgentGymError;

create_exception!(
    _core,
    WireFormatError,
    AgentGymError,
    "A group message could not be encoded or decoded."
);
create_exception!(
    _core,
    TruncatedMessageError,
    WireFormatError,
    "The message ended before a complete value was read."
);
create_exception!(
    _core,
    MalformedMessageError,
    WireFormatError,
    "The bytes do not follow the group schema."
);
create_exception!(
    _core,
    SchemaVersionError,
    WireFormatError,
    "The message was written under an unsupported schema version."
);
create_exception!(
    _core,
    MissingFieldError,
    WireFormatError,
    "A required key is absent."
);
create_exception!(
    _core,
    InvalidValueError,
    WireFormatError,
    "A value is outside its domain (unknown status, span out of range, ...)."
);
create_exception!(
    _core,
    InconsistentLengthError,
    WireFormatError,
    "Per-token arrays or a shape and its data disagree in length."
);

pub(crate) fn wire_error(e: WireError) -> PyErr {
    let msg = e.to_string();
    match e {
        WireError::Truncated { .. } => TruncatedMessageError::new_err(msg),
        WireError::Malformed { .. } => MalformedMessageError::new_err(msg),
        WireError::SchemaVersion { .. } => SchemaVersionError::new_err(msg),
        WireError::MissingField { .. } => MissingFieldError::new_err(msg),
        WireError::InvalidValue { .. } => InvalidValueError::new_err(msg),
        WireError::InconsistentLength { .. } => InconsistentLengthError::new_err(msg),
        _ => WireFormatError::new_err(msg),
    }
}

fn tokens_dict<'py>(py: Python<'py>, t: TokenArrays) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let spans = t.turn_spans.len() / 2;
    d.set_item("input_ids", to_numpy(py, t.input_ids))?;
    d.set_item("loss_mask", to_numpy(py, t.loss_mask))?;
    d.set_item("logprobs", to_numpy(py, t.logprobs))?;
    d.set_item("versions", to_numpy(py, t.versions))?;
    d.set_item(
        "turn_spans",
        to_numpy(py, t.turn_spans).reshape([spans, 2])?,
    )?;
    Ok(d)
}

fn group_dict(py: Python<'_>, g: Group) -> PyResult<Bound<'_, PyDict>> {
    let version = agentgym_wire::version_of(&g);
    let samples = PyList::empty(py);
    for s in g.samples {
        let d = PyDict::new(py);
        d.set_item("tokens", tokens_dict(py, s.tokens)?)?;
        d.set_item("reward", s.reward)?;
        d.set_item("status", s.status.as_str())?;
        d.set_item("drift", s.drift)?;
        d.set_item("turns", s.turns)?;
        d.set_item("turn_cap", s.turn_cap)?;
        d.set_item("stage", s.stage)?;
        d.set_item("dispatch_version", s.dispatch_version)?;
        d.set_item("request_id", s.request_id)?;
        d.set_item("turn_rewards", to_numpy(py, s.turn_rewards))?;
        d.set_item("turn_keys", to_numpy(py, s.turn_keys))?;
        d.set_item("episode", s.episode)?;
        samples.append(d)?;
    }
    let d = PyDict::new(py);
    d.set_item("v", version)?;
    d.set_item("group_id", g.group_id)?;
    d.set_item("task_id", g.task_id)?;
    d.set_item("env", g.env)?;
    d.set_item("samples", samples)?;
    Ok(d)
}

fn item<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(key)?
        .ok_or_else(|| PyTypeError::new_err(format!("group dict lacks key {key:?}")))
}

/// A C-contiguous numpy array of the exact dtype, flattened.
fn array<T: numpy::Element + Copy>(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Vec<T>> {
    let arr: PyReadonlyArrayDyn<'_, T> = item(d, key)?.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{key:?} must be a numpy array of dtype {}",
            std::any::type_name::<T>()
        ))
    })?;
    if !arr.is_c_contiguous() {
        return Err(PyTypeError::new_err(format!(
            "{key:?} must be C-contiguous"
        )));
    }
    Ok(arr.as_slice().map(<[T]>::to_vec).unwrap_or_default())
}

/// `array` when `key` is present, else empty (the per-turn arrays of schema version 2).
fn optional_array<T: numpy::Element + Copy>(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Vec<T>> {
    match d.get_item(key)? {
        Some(_) => array(d, key),
        None => Ok(Vec::new()),
    }
}

fn group_from_dict(g: &Bound<'_, PyDict>) -> PyResult<Group> {
    let mut samples = Vec::new();
    for s in item(g, "samples")?.try_iter()? {
        let s = s?.cast_into::<PyDict>()?;
        let t = item(&s, "tokens")?.cast_into::<PyDict>()?;
        let status: String = item(&s, "status")?.extract()?;
        samples.push(Sample {
            tokens: TokenArrays {
                input_ids: array(&t, "input_ids")?,
                loss_mask: array(&t, "loss_mask")?,
                logprobs: array(&t, "logprobs")?,
                versions: array(&t, "versions")?,
                turn_spans: array(&t, "turn_spans")?,
            },
            reward: item(&s, "reward")?.extract()?,
            status: Status::parse(&status).map_err(wire_error)?,
            drift: item(&s, "drift")?.extract()?,
            turns: item(&s, "turns")?.extract()?,
            turn_cap: item(&s, "turn_cap")?.extract()?,
            stage: item(&s, "stage")?.extract()?,
            dispatch_version: item(&s, "dispatch_version")?.extract()?,
            request_id: match s.get_item("request_id")? {
                Some(v) => v.extract()?,
                None => String::new(),
            },
            turn_rewards: optional_array(&s, "turn_rewards")?,
            turn_keys: optional_array(&s, "turn_keys")?,
            episode: match s.get_item("episode")? {
                Some(v) => v.extract()?,
                None => None,
            },
        });
    }
    Ok(Group {
        group_id: item(g, "group_id")?.extract()?,
        task_id: item(g, "task_id")?.extract()?,
        env: item(g, "env")?.extract()?,
        samples,
    })
}

/// Decode a group message into the `Group` carrier.
#[pyfunction]
fn decode_group(py: Python<'_>, data: &[u8]) -> PyResult<PyGroup> {
    let group = py
        .detach(|| agentgym_wire::decode_group(data))
        .map_err(wire_error)?;
    Ok(PyGroup(group))
}

/// Decode a group message into a dict of numpy arrays (no copy) and scalars.
#[pyfunction]
fn decode_group_dict<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let group = py
        .detach(|| agentgym_wire::decode_group(data))
        .map_err(wire_error)?;
    group_dict(py, group)
}

thread_local! {
    /// Encode buffer reused across calls: fresh ~MB allocations cost more in page faults than
    /// the encoding itself.
    static ENCODE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn encode_to_pybytes<'py>(py: Python<'py>, g: &Group) -> PyResult<Bound<'py, PyBytes>> {
    ENCODE_BUF.with_borrow_mut(|buf| {
        buf.clear();
        py.detach(|| agentgym_wire::encode_group_into(g, buf))
            .map_err(wire_error)?;
        let out = PyBytes::new(py, buf);
        // Do not pin a huge buffer forever after one outsized group.
        if buf.capacity() > 64 << 20 {
            *buf = Vec::new();
        }
        Ok(out)
    })
}

/// Encode a `Group` carrier, or a dict shaped like `decode_group_dict`'s result.
#[pyfunction]
fn encode_group<'py>(py: Python<'py>, group: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(carrier) = group.cast::<PyGroup>() {
        return encode_to_pybytes(py, &carrier.get().0);
    }
    let dict = group
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("encode_group expects a Group or a dict"))?;
    encode_to_pybytes(py, &group_from_dict(dict)?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("WIRE_SCHEMA_VERSION", agentgym_wire::SCHEMA_VERSION)?;
    m.add("WireFormatError", py.get_type::<WireFormatError>())?;
    m.add(
        "TruncatedMessageError",
        py.get_type::<TruncatedMessageError>(),
    )?;
    m.add(
        "MalformedMessageError",
        py.get_type::<MalformedMessageError>(),
    )?;
    m.add("SchemaVersionError", py.get_type::<SchemaVersionError>())?;
    m.add("MissingFieldError", py.get_type::<MissingFieldError>())?;
    m.add("InvalidValueError", py.get_type::<InvalidValueError>())?;
    m.add(
        "InconsistentLengthError",
        py.get_type::<InconsistentLengthError>(),
    )?;
    m.add_function(wrap_pyfunction!(decode_group, m)?)?;
    m.add_function(wrap_pyfunction!(decode_group_dict, m)?)?;
    m.add_function(wrap_pyfunction!(encode_group, m)?)?;
    Ok(())
}
