//! pyo3-async-runtimes' generic runtime driven by `agentgym_envpool::runtime` (fork-aware),
//! with asyncio task locals kept in a tokio task-local.
use std::future::Future;
use std::pin::Pin;

use pyo3_async_runtimes::generic::{ContextExt, Runtime};
use pyo3_async_runtimes::TaskLocals;

/// pyo3-async-runtimes driven by the envpool runtime.
pub(super) struct PoolRuntime;

tokio::task_local! {
    static LOCALS: TaskLocals;
}

type Join = Pin<Box<dyn Future<Output = Result<(), tokio::task::JoinError>> + Send>>;

impl Runtime for PoolRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = Join;

    fn spawn<F>(fut: F) -> Join
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // Every pool method checks the runtime first, so it exists here.
        match agentgym_envpool::runtime::handle() {
            Ok(h) => Box::pin(h.spawn(fut)),
            Err(_) => Box::pin(async { Ok(()) }),
        }
    }

    fn spawn_blocking<F>(f: F) -> Join
    where
        F: FnOnce() + Send + 'static,
    {
        match agentgym_envpool::runtime::handle() {
            Ok(h) => Box::pin(h.spawn_blocking(f)),
            Err(_) => Box::pin(async { Ok(()) }),
        }
    }
}

impl ContextExt for PoolRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        Box::pin(LOCALS.scope(locals, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        LOCALS.try_with(Clone::clone).ok()
    }
}
