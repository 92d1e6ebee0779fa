//! A finite double as JSON text, byte for byte as orjson writes it: orjson formats a finite
//! float with the `zmij` crate's `Buffer::format_finite` (shortest round-trip digits, ".0"
//! on an integer's, an exponent past 16 digits or below 1e-5 as "1e+16", "1e-7"), and so does
//! this. `projections.kernels.encode_float_in_python`, orjson itself, is the twin.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The JSON text of the finite `value`, appended to `out`.
pub fn write_float(out: &mut Vec<u8>, value: f64) {
    debug_assert!(value.is_finite(), "JSON has no text for {value}");
    out.extend_from_slice(zmij::Buffer::new().format_finite(value).as_bytes());
}

/// `orjson.dumps(value)` of a finite float; a ValueError for NaN and the infinities, which
/// have no JSON text (orjson writes them as null).
#[pyfunction]
pub fn encode_float(py: Python<'_>, value: f64) -> PyResult<Bound<'_, PyBytes>> {
    if !value.is_finite() {
        return Err(PyValueError::new_err(format!("{value} is not a finite float: JSON has no text for it")));
    }
    let mut out = Vec::with_capacity(24);
    write_float(&mut out, value);
    Ok(PyBytes::new(py, &out))
}
