//! Async connections to many AgentGym environment servers.
//!
//! Rollouts spend most of their wall-clock time waiting on environments, and env servers die,
//! hang and leak. This crate gives the rollout loop one [`EnvPool`] over a fleet of servers:
//! keep-alive HTTP (the AgentGym protocol and its variants, see [`Dialect`]) or ZeroMQ (the
//! native msgpack protocol with batched steps), a concurrency limit per server, least-loaded
//! placement of new episodes, periodic health checks that take dead servers out and put
//! restarted ones back, deadlines on every call, and retries only where they cannot duplicate
//! an action. A step that fails ambiguously ends its episode as [`EnvPoolError::EnvFailure`],
//! which the rollout loop records as an environment failure.
//!
//! Pyo3-free; the `agentgym_rl._core` binding wraps it.
mod config;
mod dialect;
mod error;
mod http;
mod message;
mod pool;
pub mod runtime;
mod server;
mod zmq;
mod zmq_codec;

pub use config::{Balance, Dialect, PoolConfig, ServerConfig, Timeouts, Transport};
pub use error::{EnvPoolError, FailureKind, Result};
pub use message::{Health, StepOutcome};
pub use pool::{Created, EnvPool};
pub use server::ServerStatus;
