//! A part's kept fingerprints with one more (`projections.kernels.pairs_with`, its
//! twin): the held `bytes` and the (hi, lo) pair after them, little-endian. In the
//! compiled fold the Python concatenation packs the pair into a `bytes` of its own first (a
//! `struct` method call and two objects): ~1,400 instructions an event, where this makes the
//! one object the pair lands in (~600: 20,004 events of big runs went from 58.5k to 57.0k
//! instructions an event with this and `projections.fold.task._replaced` together).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `pairs`, then `hi` and `lo` as 8 bytes little-endian each.
#[pyfunction]
pub fn with_pair<'py>(pairs: &Bound<'py, PyBytes>, hi: u64, lo: u64) -> PyResult<Bound<'py, PyBytes>> {
    let held = pairs.as_bytes();
    let end = held.len();
    PyBytes::new_with(pairs.py(), end + 16, |out| {
        out[..end].copy_from_slice(held);
        out[end..end + 8].copy_from_slice(&hi.to_le_bytes());
        out[end + 8..].copy_from_slice(&lo.to_le_bytes());
        Ok(())
    })
}
