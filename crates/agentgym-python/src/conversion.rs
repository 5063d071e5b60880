//! Python <-> Rust conversions shared by the binding modules.
//!
//! Vectors go to numpy without a copy (`into_pyarray` takes ownership of the allocation).
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

/// Hand an owned vector to numpy without copying.
pub(crate) fn to_numpy<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
) -> Bound<'py, PyArray1<T>> {
    v.into_pyarray(py)
}
