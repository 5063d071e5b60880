//! Python <-> Rust conversions shared by the binding modules.
//!
//! Vectors go to numpy without a copy (`into_pyarray` takes ownership of the allocation);
//! seconds given as Python floats become `Duration`s.
use std::time::Duration;

use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Hand an owned vector to numpy without copying.
pub(crate) fn to_numpy<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
) -> Bound<'py, PyArray1<T>> {
    v.into_pyarray(py)
}

/// Seconds (a Python float) as a `Duration`; negative, NaN or huge values are a `ValueError`.
pub(crate) fn duration(seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| PyValueError::new_err(format!("invalid duration {seconds} s")))
}
