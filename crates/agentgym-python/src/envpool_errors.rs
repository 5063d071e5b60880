//! One Python exception per `EnvPoolError` variant, all under `EnvPoolError(AgentGymError)`.
use agentgym_envpool::EnvPoolError as RustError;
use pyo3::create_exception;
use pyo3::prelude::*;

use crate::errors::AgentGymError;

create_exception!(
    _core,
    EnvPoolError,
    AgentGymError,
    "An env pool call failed."
);
create_exception!(
    _core,
    UnknownEnvError,
    EnvPoolError,
    "No server is configured for this environment."
);
create_exception!(
    _core,
    NoServerUpError,
    EnvPoolError,
    "Every server of this environment is down."
);
create_exception!(
    _core,
    UnknownEpisodeError,
    EnvPoolError,
    "The episode is not live in this pool."
);
create_exception!(
    _core,
    EnvRefusedError,
    EnvPoolError,
    "The server refused the request; the episode is intact."
);
create_exception!(
    _core,
    EnvTimeoutError,
    EnvPoolError,
    "No reply in time (after retries, for idempotent calls)."
);
create_exception!(
    _core,
    EnvConnectionError,
    EnvPoolError,
    "The connection to the server failed."
);
create_exception!(
    _core,
    MalformedReplyError,
    EnvPoolError,
    "The server's reply could not be understood."
);
create_exception!(
    _core,
    HttpStatusError,
    EnvPoolError,
    "The server answered with an HTTP status other than 200."
);
create_exception!(
    _core,
    EnvFailureError,
    EnvPoolError,
    "A step failed ambiguously: the episode is over and counts as an environment failure."
);
create_exception!(
    _core,
    EnvPoolConfigError,
    EnvPoolError,
    "The pool configuration is invalid."
);
create_exception!(
    _core,
    EnvPoolRuntimeError,
    EnvPoolError,
    "The pool's background runtime could not start."
);
create_exception!(
    _core,
    EnvPoolForkedError,
    EnvPoolError,
    "The pool was created in another process (before fork); create a new one."
);
create_exception!(
    _core,
    EnvPoolClosedError,
    EnvPoolError,
    "The pool is shut down."
);

pub(super) fn envpool_error(e: RustError) -> PyErr {
    let msg = e.to_string();
    match e {
        RustError::UnknownEnv(_) => UnknownEnvError::new_err(msg),
        RustError::NoServerUp { .. } => NoServerUpError::new_err(msg),
        RustError::UnknownEpisode(_) => UnknownEpisodeError::new_err(msg),
        RustError::Refused { .. } => EnvRefusedError::new_err(msg),
        RustError::Timeout { .. } => EnvTimeoutError::new_err(msg),
        RustError::Connection { .. } => EnvConnectionError::new_err(msg),
        RustError::Malformed { .. } => MalformedReplyError::new_err(msg),
        RustError::HttpStatus { .. } => HttpStatusError::new_err(msg),
        RustError::EnvFailure { .. } => EnvFailureError::new_err(msg),
        RustError::Config(_) => EnvPoolConfigError::new_err(msg),
        RustError::Runtime(_) => EnvPoolRuntimeError::new_err(msg),
        RustError::Forked { .. } => EnvPoolForkedError::new_err(msg),
        RustError::Closed => EnvPoolClosedError::new_err(msg),
        _ => EnvPoolError::new_err(msg),
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("EnvPoolError", py.get_type::<EnvPoolError>())?;
    m.add("UnknownEnvError", py.get_type::<UnknownEnvError>())?;
    m.add("NoServerUpError", py.get_type::<NoServerUpError>())?;
    m.add("UnknownEpisodeError", py.get_type::<UnknownEpisodeError>())?;
    m.add("EnvRefusedError", py.get_type::<EnvRefusedError>())?;
    m.add("EnvTimeoutError", py.get_type::<EnvTimeoutError>())?;
    m.add("EnvConnectionError", py.get_type::<EnvConnectionError>())?;
    m.add("MalformedReplyError", py.get_type::<MalformedReplyError>())?;
    m.add("HttpStatusError", py.get_type::<HttpStatusError>())?;
    m.add("EnvFailureError", py.get_type::<EnvFailureError>())?;
    m.add("EnvPoolConfigError", py.get_type::<EnvPoolConfigError>())?;
    m.add("EnvPoolRuntimeError", py.get_type::<EnvPoolRuntimeError>())?;
    m.add("EnvPoolForkedError", py.get_type::<EnvPoolForkedError>())?;
    m.add("EnvPoolClosedError", py.get_type::<EnvPoolClosedError>())?;
    Ok(())
}
