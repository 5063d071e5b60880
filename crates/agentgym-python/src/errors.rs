//! The root of the Python exception tree. Each subsystem module declares its own exceptions as
//! subclasses of `AgentGymError`, one per error variant, and maps its crate's error enum onto them.
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _core,
    AgentGymError,
    PyException,
    "Base class of every error raised by agentgym_rl's Rust core."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("AgentGymError", m.py().get_type::<AgentGymError>())?;
    Ok(())
}
