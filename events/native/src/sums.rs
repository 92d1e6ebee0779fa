//! The range aggregate's loops over a list of floats (`projections.aggregates`, their
//! reference): the running compensated (Neumaier) sum, the finite values with theirs, and the
//! sum of their squared deviations from a mean. The same IEEE 754 operations in the same order
//! as the Python loops, so the same bits: Rust's `f64` arithmetic is the C doubles the
//! compiled fold does, with no contraction into fused multiply-adds, and a square is the C
//! library's `pow`, the function `math.pow` calls.
//!
//! In the compiled fold each value of those loops is a boxed float read back, a new one made
//! for each square and each finite value listed again: ~270 instructions a value for the
//! center and ~280 for the spread of a 5,000-task column. Here they are a load and a few
//! adds. A list holding anything but exact floats is left to the Python loops (None).

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

extern "C" {
    fn pow(x: f64, y: f64) -> f64;
}

/// Each item's double, or None where one is not exactly a float.
fn doubles(values: &Bound<'_, PyList>) -> Option<Vec<f64>> {
    let mut read = Vec::with_capacity(values.len());
    for at in 0..values.len() {
        // SAFETY: `at` is within the list, which no Python code runs to change while the GIL
        // is held here; the item is borrowed, not kept.
        unsafe {
            let item = ffi::PyList_GET_ITEM(values.as_ptr(), at as ffi::Py_ssize_t);
            if ffi::PyFloat_CheckExact(item) == 0 {
                return None;
            }
            read.push(ffi::PyFloat_AS_DOUBLE(item));
        }
    }
    Some(read)
}

/// `running_sum`'s step for each of `values`, from `total` and `compensation`.
fn running(values: impl Iterator<Item = f64>, mut total: f64, mut compensation: f64) -> (f64, f64) {
    for value in values {
        let step = total + value;
        // `abs` as the Python loop spells it: the same branches for every double, NaN included.
        if (if total >= 0.0 { total } else { -total }) >= (if value >= 0.0 { value } else { -value }) {
            compensation += (total - step) + value;
        } else {
            compensation += (value - step) + total;
        }
        total = step;
    }
    (total, compensation)
}

fn finite(value: f64) -> bool {
    !(value.is_infinite() || value.is_nan())
}

/// `projections.aggregates.running_sum(values, total, compensation)`.
#[pyfunction]
pub fn running_sum(values: &Bound<'_, PyList>, total: f64, compensation: f64) -> Option<(f64, f64)> {
    Some(running(doubles(values)?.into_iter(), total, compensation))
}

/// `finite_values(values)` and the running sum of those from `total` and `compensation`.
#[pyfunction]
pub fn finite_running_sum<'py>(
    values: &Bound<'py, PyList>,
    total: f64,
    compensation: f64,
) -> PyResult<Option<(Bound<'py, PyList>, f64, f64)>> {
    let Some(read) = doubles(values) else {
        return Ok(None);
    };
    let kept: Vec<usize> = (0..read.len()).filter(|&at| finite(read[at])).collect();
    let (total, compensation) = running(kept.iter().map(|&at| read[at]), total, compensation);
    let listed = if kept.len() == read.len() {
        // The same items in the same order: a new list, since the caller's grows on.
        values.get_slice(0, read.len())
    } else {
        PyList::new(values.py(), kept.iter().map(|&at| values.get_item(at).expect("an index within the list")))?
    };
    Ok(Some((listed, total, compensation)))
}

/// The running sum, from zero, of `pow(value - mean, 2.0)` for each of `values`: the
/// squared deviations `projections.aggregates.spread` sums (a square past the largest double
/// is +Infinity, which `math.pow` raises for and `square` then gives).
#[pyfunction]
pub fn squares_running_sum(values: &Bound<'_, PyList>, mean: f64) -> Option<(f64, f64)> {
    // Through `black_box`, the exponent is not a constant the optimiser would turn
    // `pow(x, 2.0)` into `x * x` for: the two differ in the last bit of some values.
    let two = std::hint::black_box(2.0);
    let read = doubles(values)?;
    // SAFETY: `pow` is the C library's, pure, defined for every pair of doubles.
    Some(running(read.into_iter().map(|value| unsafe { pow(value - mean, two) }), 0.0, 0.0))
}
