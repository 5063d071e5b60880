//! Lazily created, fork-aware tokio runtimes.
//!
//! The Rust core runs its socket IO (env pool, transport) on background runtimes that Python
//! never sees. A tokio runtime does not survive `fork()`: its worker threads are not copied. So
//! each runtime is keyed by the process id that made it: a forked child gets a fresh runtime,
//! and the parent's copy is leaked, never dropped (dropping would wait for threads that do not
//! exist in the child). Objects bound to the parent's runtime check [`check_pid`] and fail
//! cleanly in the child instead of hanging.
use std::sync::{Mutex, PoisonError};

use tokio::runtime::{Builder, Handle, Runtime};

/// One named runtime per process, created on first use.
pub struct RuntimeSlot {
    name: &'static str,
    worker_threads: usize,
    slot: Mutex<Option<(u32, Runtime)>>,
}

impl RuntimeSlot {
    pub const fn new(name: &'static str, worker_threads: usize) -> Self {
        Self {
            name,
            worker_threads,
            slot: Mutex::new(None),
        }
    }

    /// A handle to this process's runtime, creating it if needed.
    pub fn handle(&self) -> std::io::Result<Handle> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
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
            .worker_threads(self.worker_threads)
            .thread_name(self.name)
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        *slot = Some((pid, rt));
        Ok(handle)
    }
}

/// An object made in process `created` is used in process `current` (after a fork).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forked {
    pub created: u32,
    pub current: u32,
}

/// Fail when called outside the process that created the object.
pub fn check_pid(created: u32) -> Result<(), Forked> {
    let current = std::process::id();
    if current == created {
        Ok(())
    } else {
        Err(Forked { created, current })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static RT: RuntimeSlot = RuntimeSlot::new("agentgym-test", 1);

    #[test]
    fn handle_is_reused_within_a_process() {
        let a = RT.handle().unwrap();
        let b = RT.handle().unwrap();
        assert_eq!(a.id(), b.id());
        assert_eq!(a.block_on(async { 41 + 1 }), 42);
    }

    #[test]
    fn check_pid_detects_another_process() {
        let me = std::process::id();
        assert_eq!(check_pid(me), Ok(()));
        let other = me.wrapping_add(1);
        assert_eq!(
            check_pid(other),
            Err(Forked {
                created: other,
                current: me
            })
        );
    }
}
