//! The background tokio runtime shared by every sender and receiver of the process.
//!
//! Created lazily on first use. A tokio runtime does not survive `fork()` (its worker threads
//! are not copied), so the runtime is keyed by process id: a child process gets a fresh one and
//! the parent's copy is leaked rather than dropped (dropping would wait for threads that do not
//! exist in the child). Sockets made before a fork stay unusable in the child
//! ([`crate::TransportError::Forked`]).
use std::sync::Once;

use agentgym_runtime::RuntimeSlot;
use tokio::runtime::Handle;

use crate::error::{Result, TransportError};

/// Worker threads of the transport runtime. zeromq 0.6 made a few blocking calls on worker
/// threads (synchronous peer-map removal when a connection drops); with two workers a sender
/// restart occasionally stalled every socket of the process for seconds, with four it did not
/// in 60 runs of the test suite. Idle workers cost nothing.
static RUNTIME: RuntimeSlot = RuntimeSlot::new("agentgym-transport", 4);
static MALLOC_TUNED: Once = Once::new();

/// A handle to this process's transport runtime, creating it if needed.
pub(crate) fn handle() -> Result<Handle> {
    MALLOC_TUNED.call_once(raise_malloc_thresholds);
    RUNTIME.handle().map_err(TransportError::Runtime)
}

/// Size of the block freed by [`raise_malloc_thresholds`] (at most glibc's 32 MiB cap).
const MALLOC_WARMUP_BYTES: usize = 16 << 20;

/// Keep received groups from being paged in anew, one by one.
///
/// The ZeroMQ decoder allocates each received frame whole, on a runtime thread, and the
/// application frees it on another thread after taking the group. glibc serves blocks above its
/// mmap threshold (128 KiB at start) with fresh mappings and hands freed heap tops above twice
/// that back to the kernel, so groups were faulted in again page by page (~40 faults per
/// 0.85 MB group, 10-20% of the stream's CPU time in benches/bench_transport.py). Freeing one large mapped block
/// raises glibc's dynamic thresholds to that block's size (and twice it for trimming), after
/// which group-sized buffers are recycled from the heap. Elsewhere this is one short-lived,
/// untouched allocation.
fn raise_malloc_thresholds() {
    // Zeroed, so it is a fresh mapping that is never touched; `black_box` keeps the pair of
    // calls from being optimised away.
    drop(std::hint::black_box(vec![0u8; MALLOC_WARMUP_BYTES]));
}

/// Fail with [`TransportError::Forked`] when used outside the creating process.
pub(crate) fn check_pid(created: u32) -> Result<()> {
    agentgym_runtime::check_pid(created).map_err(|f| TransportError::Forked {
        created: f.created,
        current: f.current,
    })
}
