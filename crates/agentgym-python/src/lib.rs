//! The `agentgym_rl._core` extension module.
//!
//! This crate only converts types and maps errors: every piece of logic lives in the pyo3-free
//! crates (`agentgym-trajectory`, `agentgym-buffer`, `agentgym-wire`, `agentgym-transport`), so
//! `cargo test` and `cargo bench` need no Python. Blocking and CPU-heavy calls release the GIL.
use pyo3::prelude::*;

mod buffer;
mod carriers;
mod conversion;
mod envpool;
mod errors;
mod trajectory;
mod transport;
mod wire;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    carriers::register(m)?;
    trajectory::register(m)?;
    buffer::register(m)?;
    wire::register(m)?;
    transport::register(m)?;
    envpool::register(m)?;
    Ok(())
}
