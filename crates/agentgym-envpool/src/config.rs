//! Pool configuration: which servers serve which environment, over which transport and
//! protocol dialect, with which limits and timeouts.
//!
//! The transport follows the address scheme (`http://` for the AgentGym HTTP protocol,
//! `tcp://`/`ipc://` for the native ZeroMQ protocol), so one list of addresses describes a fleet.
use std::time::Duration;

use crate::error::{EnvPoolError, Result};

/// Variants of the AgentGym HTTP protocol (ignored for ZeroMQ servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Dialect {
    /// BabyAI / TextCraft / SciWorld: key `id`, `/reset {"id","data_idx"}`; health is
    /// `GET /health` (this project's servers), else `GET /` (AgentGym's, which lack `/health`).
    #[default]
    AgentGym,
    /// SearchQA: key `env_idx`, bare-int `/create`, `/reset {"env_idx","id"}` answered by a bare
    /// prompt string; health is `GET /`.
    SearchQa,
    /// WebArena: key `env_idx`, `/reset {"env_idx","seed","idx"}`, `terminated`/`truncated`
    /// instead of `done`; health is `GET /`.
    WebArena,
}

impl Dialect {
    /// Parse `agentgym` (also `babyai`, `textcraft`, `sciworld`), `searchqa` or `webarena`.
    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "agentgym" | "babyai" | "textcraft" | "sciworld" => Ok(Dialect::AgentGym),
            "searchqa" => Ok(Dialect::SearchQa),
            "webarena" => Ok(Dialect::WebArena),
            other => Err(EnvPoolError::Config(format!(
                "unknown dialect {other:?}: expected agentgym, searchqa or webarena"
            ))),
        }
    }

    /// The episode key in request bodies and query strings.
    pub fn id_key(self) -> &'static str {
        match self {
            Dialect::AgentGym => "id",
            Dialect::SearchQa | Dialect::WebArena => "env_idx",
        }
    }
}

/// Transport of one server, chosen by its address scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// AgentGym HTTP protocol (JSON over keep-alive HTTP/1.1).
    Http,
    /// Native ZeroMQ protocol (msgpack over DEALER/ROUTER, batched steps).
    Zmq,
}

/// One env server process.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Environment name the pool routes `create(env)` by.
    pub env: String,
    /// `http://host:port` or `tcp://host:port` / `ipc://path`.
    pub address: String,
    /// HTTP protocol variant.
    pub dialect: Dialect,
    /// Requests in flight to this server at most (a ZeroMQ batch counts as one).
    pub max_inflight: usize,
}

impl ServerConfig {
    /// A server of `env` at `address` with the default dialect and limit.
    pub fn new(env: impl Into<String>, address: impl Into<String>) -> Self {
        ServerConfig {
            env: env.into(),
            address: address.into(),
            dialect: Dialect::AgentGym,
            max_inflight: 64,
        }
    }

    /// The transport the address scheme selects.
    pub fn transport(&self) -> Result<Transport> {
        if self.address.starts_with("http://") {
            Ok(Transport::Http)
        } else if self.address.starts_with("tcp://") || self.address.starts_with("ipc://") {
            Ok(Transport::Zmq)
        } else {
            Err(EnvPoolError::Config(format!(
                "server address {:?} must start with http://, tcp:// or ipc://",
                self.address
            )))
        }
    }
}

/// How `create` picks among the up servers of an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Balance {
    /// Fewest live episodes (ties broken round robin).
    #[default]
    LeastLoaded,
    /// Strict rotation.
    RoundRobin,
}

impl Balance {
    /// Parse `least_loaded` or `round_robin`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "least_loaded" => Ok(Balance::LeastLoaded),
            "round_robin" => Ok(Balance::RoundRobin),
            other => Err(EnvPoolError::Config(format!(
                "unknown balance {other:?}: expected least_loaded or round_robin"
            ))),
        }
    }
}

/// Per-call deadlines. Each covers waiting for a concurrency permit and the request itself.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub create: Duration,
    pub reset: Duration,
    pub step: Duration,
    pub observation: Duration,
    pub close: Duration,
    pub health: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            create: Duration::from_secs(30),
            reset: Duration::from_secs(30),
            step: Duration::from_secs(60),
            observation: Duration::from_secs(10),
            close: Duration::from_secs(10),
            health: Duration::from_secs(2),
        }
    }
}

/// Everything an [`crate::EnvPool`] needs.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    pub servers: Vec<ServerConfig>,
    pub balance: Balance,
    pub timeouts: Timeouts,
    /// Period of the background health checks (zero turns them off).
    pub health_interval: Duration,
    /// Extra attempts of an idempotent call after a transient failure.
    pub retries: usize,
    /// First backoff delay between attempts (doubles, capped at one second, with jitter).
    pub retry_delay: Duration,
    /// Idle keep-alive connections are dropped after this long. Must stay below the server's
    /// keep-alive (uvicorn: 5 s), or a POST may land on a socket the server just closed.
    pub pool_idle_timeout: Duration,
}

impl PoolConfig {
    /// A configuration with defaults around `servers`.
    pub fn new(servers: Vec<ServerConfig>) -> Self {
        PoolConfig {
            servers,
            balance: Balance::LeastLoaded,
            timeouts: Timeouts::default(),
            health_interval: Duration::from_secs(1),
            retries: 3,
            retry_delay: Duration::from_millis(50),
            pool_idle_timeout: Duration::from_secs(4),
        }
    }

    /// Reject configurations that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.servers.is_empty() {
            return Err(EnvPoolError::Config("no servers".into()));
        }
        for s in &self.servers {
            s.transport()?;
            if s.max_inflight == 0 {
                return Err(EnvPoolError::Config(format!(
                    "{}: max_inflight is 0",
                    s.address
                )));
            }
            if s.env.is_empty() {
                return Err(EnvPoolError::Config(format!(
                    "{}: empty env name",
                    s.address
                )));
            }
        }
        let t = &self.timeouts;
        let all = [
            t.connect,
            t.create,
            t.reset,
            t.step,
            t.observation,
            t.close,
            t.health,
        ];
        if all.iter().any(Duration::is_zero) {
            return Err(EnvPoolError::Config("timeouts must be positive".into()));
        }
        if self.pool_idle_timeout >= Duration::from_secs(5) {
            return Err(EnvPoolError::Config(
                "pool_idle_timeout must stay below uvicorn's 5 s keep-alive".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_names_parse_and_others_are_config_errors() {
        assert!(matches!(
            Balance::parse("least_loaded"),
            Ok(Balance::LeastLoaded)
        ));
        assert!(matches!(
            Balance::parse("round_robin"),
            Ok(Balance::RoundRobin)
        ));
        let err = Balance::parse("random").unwrap_err();
        assert!(matches!(err, EnvPoolError::Config(_)));
        assert!(
            err.to_string().contains("unknown balance \"random\""),
            "{err}"
        );
    }

    #[test]
    fn dialect_names_parse_case_insensitively_and_others_are_config_errors() {
        assert!(matches!(Dialect::parse("BabyAI"), Ok(Dialect::AgentGym)));
        assert!(matches!(Dialect::parse("searchqa"), Ok(Dialect::SearchQa)));
        assert!(matches!(Dialect::parse("webarena"), Ok(Dialect::WebArena)));
        assert!(matches!(
            Dialect::parse("gopher"),
            Err(EnvPoolError::Config(_))
        ));
    }
}
