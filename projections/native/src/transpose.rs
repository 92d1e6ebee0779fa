//! Section 8's per-task figures gathered into one column per k (`projections.kernels.transposed_in_python`,
//! its twin, for `projections.figures.passk.by_k`): the same float objects, moved by reference. In the compiled fold each
//! figure was read out of its tuple as a double and a new float object made of it for its
//! column: ~24M instructions a revision of a 5,000-task run.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// Column k (0-based) of `figures` for each k below the longest: the k-th item of each tuple
/// longer than k, in the order of `figures`. None where an item of `figures` is not exactly
/// a tuple.
#[pyfunction]
pub fn transposed<'py>(figures: &Bound<'py, PyList>) -> PyResult<Option<Bound<'py, PyList>>> {
    let mut rows: Vec<Bound<'py, PyTuple>> = Vec::with_capacity(figures.len());
    for item in figures.iter() {
        match item.downcast_exact::<PyTuple>() {
            Ok(row) => rows.push(row.clone()),
            Err(_) => return Ok(None),
        }
    }
    let longest = rows.iter().map(|row| row.len()).max().unwrap_or(0);
    let py = figures.py();
    let columns = PyList::empty(py);
    for k in 0..longest {
        let column: Vec<Bound<'py, PyAny>> = rows
            .iter()
            .filter(|row| row.len() > k)
            // SAFETY: k is within the row, a tuple (immutable); the item is borrowed and
            // then owned by the new reference taken here.
            .map(|row| unsafe {
                Bound::from_borrowed_ptr(py, ffi::PyTuple_GET_ITEM(row.as_ptr(), k as ffi::Py_ssize_t))
            })
            .collect();
        columns.append(PyList::new(py, column)?)?;
    }
    Ok(Some(columns))
}
