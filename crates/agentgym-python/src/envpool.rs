//! Binding for `agentgym-envpool`: converts arguments and results, maps each `EnvPoolError`
//! variant onto its own exception, and turns the pool's futures into asyncio awaitables.
//!
//! Awaitables come from pyo3-async-runtimes' generic API driven by the envpool crate's
//! fork-aware runtime (pyo3-async-runtimes' own tokio runtime is a process-wide static that a
//! forked child would inherit without its threads). Futures run on that runtime's threads, so
//! the Python event loop (asyncio or uvloop) never blocks and the GIL is not held meanwhile.
use std::future::Future;

use agentgym_envpool::{
    Balance, Created, Dialect, EnvPool as RustPool, PoolConfig, ServerConfig, ServerStatus,
    StepOutcome,
};
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3_async_runtimes::generic;

#[path = "envpool_errors.rs"]
mod errors;
#[path = "envpool_runtime.rs"]
mod runtime;

use errors::envpool_error;
use runtime::PoolRuntime;

use crate::conversion::duration;

/// One env server: environment name, address (`http://` or `tcp://`), protocol dialect.
#[pyclass(
    module = "agentgym_rl._core",
    name = "EnvServer",
    frozen,
    from_py_object
)]
#[derive(Clone)]
struct PyEnvServer(ServerConfig);

#[pymethods]
impl PyEnvServer {
    #[new]
    #[pyo3(signature = (env, address, *, dialect="agentgym", max_inflight=64))]
    fn new(env: String, address: String, dialect: &str, max_inflight: usize) -> PyResult<Self> {
        let mut config = ServerConfig::new(env, address);
        config.dialect = Dialect::parse(dialect).map_err(envpool_error)?;
        config.max_inflight = max_inflight;
        config.transport().map_err(envpool_error)?;
        Ok(Self(config))
    }
    #[getter]
    fn env(&self) -> &str {
        &self.0.env
    }
    #[getter]
    fn address(&self) -> &str {
        &self.0.address
    }
    #[getter]
    fn max_inflight(&self) -> usize {
        self.0.max_inflight
    }
    fn __repr__(&self) -> String {
        format!("EnvServer({:?}, {:?})", self.0.env, self.0.address)
    }
}

/// What a reset or step produced.
#[pyclass(module = "agentgym_rl._core", name = "StepOutcome", frozen, get_all)]
struct PyStepOutcome {
    observation: String,
    reward: f64,
    score: f64,
    done: bool,
    invalid: bool,
    info: Option<String>,
}

impl From<StepOutcome> for PyStepOutcome {
    fn from(o: StepOutcome) -> Self {
        PyStepOutcome {
            observation: o.observation,
            reward: o.reward,
            score: o.score,
            done: o.done,
            invalid: o.invalid,
            info: o.info,
        }
    }
}

#[pymethods]
impl PyStepOutcome {
    fn __repr__(&self) -> String {
        let done = if self.done { "True" } else { "False" };
        format!(
            "StepOutcome(reward={}, score={}, done={done}, observation={:?})",
            self.reward, self.score, self.observation
        )
    }
}

/// A new episode: its handle, its server, and the first observation when `create` resets.
#[pyclass(module = "agentgym_rl._core", name = "CreatedEpisode", frozen, get_all)]
struct PyCreated {
    episode: u64,
    server: String,
    first: Option<Py<PyStepOutcome>>,
}

/// One server's state as the pool sees it.
#[pyclass(
    module = "agentgym_rl._core",
    name = "EnvServerStatus",
    frozen,
    get_all
)]
struct PyServerStatus {
    env: String,
    address: String,
    up: bool,
    live_episodes: usize,
    inflight: usize,
    generation: u64,
    reported_live_episodes: Option<u64>,
    uptime_s: Option<f64>,
}

impl From<ServerStatus> for PyServerStatus {
    fn from(s: ServerStatus) -> Self {
        PyServerStatus {
            reported_live_episodes: s.reported.as_ref().and_then(|h| h.live_episodes),
            uptime_s: s.reported.as_ref().and_then(|h| h.uptime_s),
            env: s.env,
            address: s.address,
            up: s.up,
            live_episodes: s.live_episodes,
            inflight: s.inflight,
            generation: s.generation,
        }
    }
}

/// Per-episode results of `step_many`: a `StepOutcome` or the exception instance.
struct StepResults(Vec<agentgym_envpool::Result<StepOutcome>>);

impl<'py> IntoPyObject<'py> for StepResults {
    type Target = PyList;
    type Output = Bound<'py, PyList>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for r in self.0 {
            match r {
                Ok(o) => list.append(PyStepOutcome::from(o))?,
                Err(e) => list.append(envpool_error(e).into_value(py))?,
            }
        }
        Ok(list)
    }
}

/// Async connections to many env servers (see `agentgym_envpool`).
#[pyclass(module = "agentgym_rl._core", name = "EnvPool", frozen)]
struct PyEnvPool {
    inner: RustPool,
}

impl PyEnvPool {
    /// Check the pool is usable in this process, then hand `fut` to asyncio.
    fn spawn<'py, F, T>(&self, py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
    where
        F: Future<Output = agentgym_envpool::Result<T>> + Send + 'static,
        T: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        self.inner.handle().map_err(envpool_error)?;
        generic::future_into_py::<PoolRuntime, _, T>(
            py,
            async move { fut.await.map_err(envpool_error) },
        )
    }
}

#[pymethods]
impl PyEnvPool {
    #[new]
    #[pyo3(signature = (servers, *, balance="least_loaded", health_interval_s=1.0, retries=3,
        retry_delay_s=0.05, pool_idle_timeout_s=4.0, connect_timeout_s=2.0,
        create_timeout_s=30.0, reset_timeout_s=30.0, step_timeout_s=60.0,
        observation_timeout_s=10.0, close_timeout_s=10.0, health_timeout_s=2.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        servers: Vec<PyEnvServer>,
        balance: &str,
        health_interval_s: f64,
        retries: usize,
        retry_delay_s: f64,
        pool_idle_timeout_s: f64,
        connect_timeout_s: f64,
        create_timeout_s: f64,
        reset_timeout_s: f64,
        step_timeout_s: f64,
        observation_timeout_s: f64,
        close_timeout_s: f64,
        health_timeout_s: f64,
    ) -> PyResult<Self> {
        let mut config = PoolConfig::new(servers.into_iter().map(|s| s.0).collect());
        config.balance = Balance::parse(balance).map_err(envpool_error)?;
        config.health_interval = duration(health_interval_s)?;
        config.retries = retries;
        config.retry_delay = duration(retry_delay_s)?;
        config.pool_idle_timeout = duration(pool_idle_timeout_s)?;
        let t = &mut config.timeouts;
        t.connect = duration(connect_timeout_s)?;
        t.create = duration(create_timeout_s)?;
        t.reset = duration(reset_timeout_s)?;
        t.step = duration(step_timeout_s)?;
        t.observation = duration(observation_timeout_s)?;
        t.close = duration(close_timeout_s)?;
        t.health = duration(health_timeout_s)?;
        let inner = py.detach(|| RustPool::new(config)).map_err(envpool_error)?;
        Ok(Self { inner })
    }

    fn create<'py>(&self, py: Python<'py>, env: String) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move {
            let Created {
                episode,
                server,
                first,
            } = pool.create(&env).await?;
            Ok(CreatedOut(episode, server, first))
        })
    }

    fn reset<'py>(
        &self,
        py: Python<'py>,
        episode: u64,
        data_idx: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move {
            pool.reset(episode, data_idx).await.map(PyStepOutcome::from)
        })
    }

    fn step<'py>(
        &self,
        py: Python<'py>,
        episode: u64,
        action: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move {
            pool.step(episode, &action).await.map(PyStepOutcome::from)
        })
    }

    fn step_many<'py>(
        &self,
        py: Python<'py>,
        items: Vec<(u64, String)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(
            py,
            async move { Ok(StepResults(pool.step_many(items).await)) },
        )
    }

    fn observation<'py>(&self, py: Python<'py>, episode: u64) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move { pool.observation(episode).await })
    }

    fn close<'py>(&self, py: Python<'py>, episode: u64) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move { pool.close(episode).await })
    }

    fn check_health<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move { pool.check_health().await })
    }

    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pool = self.inner.clone();
        self.spawn(py, async move {
            pool.shutdown().await;
            Ok(())
        })
    }

    fn servers(&self) -> Vec<PyServerStatus> {
        self.inner
            .servers()
            .into_iter()
            .map(PyServerStatus::from)
            .collect()
    }

    #[getter]
    fn live_episodes(&self) -> usize {
        self.inner.live_episodes()
    }
}

/// `CreatedEpisode` built on the Python side of the future (it holds a Python object).
struct CreatedOut(u64, String, Option<StepOutcome>);

impl<'py> IntoPyObject<'py> for CreatedOut {
    type Target = PyCreated;
    type Output = Bound<'py, PyCreated>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyCreated>> {
        let first = self
            .2
            .map(|o| Py::new(py, PyStepOutcome::from(o)))
            .transpose()?;
        Bound::new(
            py,
            PyCreated {
                episode: self.0,
                server: self.1,
                first,
            },
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<PyEnvServer>()?;
    m.add_class::<PyStepOutcome>()?;
    m.add_class::<PyCreated>()?;
    m.add_class::<PyServerStatus>()?;
    m.add_class::<PyEnvPool>()?;
    Ok(())
}
