//! The background tokio runtime that drives every pool of the process.
//!
//! Created lazily on first use and keyed by process id: a tokio runtime does not survive
//! `fork()` (its worker threads are not copied), so a child gets a fresh runtime and the
//! parent's copy is leaked, never dropped (dropping would wait for threads that do not exist in
//! the child). The same pattern as `agentgym-transport`'s runtime; the two are kept separate so
//! that env traffic and trajectory streaming do not share worker threads.
use std::sync::{Mutex, PoisonError};

use tokio::runtime::{Builder, Handle, Runtime};

use crate::error::{EnvPoolError, Result};

static RUNTIME: Mutex<Option<(u32, Runtime)>> = Mutex::new(None);

/// Worker threads: env IO is light per request; two keep JSON/msgpack decoding of a large
/// batch from stalling the health checks.
const WORKER_THREADS: usize = 2;

/// A handle to this process's env-pool runtime, creating it if needed.
pub fn handle() -> Result<Handle> {
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    if let Some((owner, rt)) = slot.as_ref() {
        if *owner == pid {
            return Ok(rt.handle().clone());
        }
    }
    if let Some((_, inherited)) = slot.take() {
        // Inherited through fork(): its threads are gone. Never drop it.
        std::mem::forget(inherited);
    }
    let rt = Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .thread_name("agentgym-envpool")
        .enable_all()
        .build()
        .map_err(EnvPoolError::Runtime)?;
    let handle = rt.handle().clone();
    *slot = Some((pid, rt));
    Ok(handle)
}

/// Fail with [`EnvPoolError::Forked`] when used outside the creating process.
pub(crate) fn check_pid(created: u32) -> Result<()> {
    let current = std::process::id();
    if current == created {
        Ok(())
    } else {
        Err(EnvPoolError::Forked { created, current })
    }
}
