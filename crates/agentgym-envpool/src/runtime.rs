//! The background runtime that drives every env pool of the process (see `agentgym-runtime`).
//! Kept apart from the transport's runtime so env traffic and trajectory streaming never wait
//! on each other's worker threads.
use agentgym_runtime::RuntimeSlot;
use tokio::runtime::Handle;

use crate::error::{EnvPoolError, Result};

/// Two workers: env IO is light per request; two keep JSON/msgpack decoding of a large batch
/// from stalling the health checks.
static RUNTIME: RuntimeSlot = RuntimeSlot::new("agentgym-envpool", 2);

/// A handle to this process's env-pool runtime, creating it if needed.
pub fn handle() -> Result<Handle> {
    RUNTIME.handle().map_err(EnvPoolError::Runtime)
}

/// Fail with [`EnvPoolError::Forked`] when used outside the creating process.
pub(crate) fn check_pid(created: u32) -> Result<()> {
    agentgym_runtime::check_pid(created).map_err(|f| EnvPoolError::Forked {
        created: f.created,
        current: f.current,
    })
}
