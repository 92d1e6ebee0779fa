//! The range aggregate's loops over a list of floats (`projections.kernels`' twins, for
//! `projections.figures.aggregates`): the running compensated (Neumaier) sum, the finite values with theirs, and the
//! sum of their squared deviations from a mean. The same IEEE 754 operations in the same order
//! as the Python loops, so the same bits: Rust's `f64` arithmetic is the C doubles the
//! compiled fold does, with no contraction into fused multiply-adds, and a square is the C
//! library's `pow`, the function `math.pow` calls.
//!
//! In the compiled fold each value of those loops is a boxed float read back, a new one made
//! for each square and each finite value listed again: ~655 instructions a value for a center
//! and spread. Here ~214, of which 145 are `pow`. A list holding anything but exact floats is left to the Python loops (None).

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyList};

extern "C" {
    fn pow(x: f64, y: f64) -> f64;
}

/// Calls `step` with each item's double, in order; false, stopping there, at an item that is
/// not exactly a float.
pub fn each_double(values: &Bound<'_, PyList>, mut step: impl FnMut(f64)) -> bool {
    let list = values.as_ptr();
    for at in 0..values.len() {
        // SAFETY: `at` is within the list, which no Python code runs to change while the GIL
        // is held here (`step` is Rust arithmetic); the item is borrowed, not kept.
        unsafe {
            let item = ffi::PyList_GET_ITEM(list, at as ffi::Py_ssize_t);
            if ffi::PyFloat_CheckExact(item) == 0 {
                return false;
            }
            step(ffi::PyFloat_AS_DOUBLE(item));
        }
    }
    true
}

/// A running sum: `running_sum`'s total and compensation, one value at a time.
pub struct Running {
    pub total: f64,
    pub compensation: f64,
}

impl Running {
    pub const ZERO: Running = Running { total: 0.0, compensation: 0.0 };

    pub fn add(&mut self, value: f64) {
        let total = self.total;
        let step = total + value;
        // `abs` as the Python loop spells it: the same branches for every double, NaN included.
        if (if total >= 0.0 { total } else { -total }) >= (if value >= 0.0 { value } else { -value }) {
            self.compensation += (total - step) + value;
        } else {
            self.compensation += (value - step) + total;
        }
        self.total = step;
    }

    /// The sum kept (`projections.kernels.finished_sum`): the compensation added once, unless
    /// it is zero (which would turn a -0.0 sum into 0.0) or not finite (after an infinite or
    /// overflowed sum, which it would turn into NaN).
    pub fn finished(&self) -> f64 {
        if self.compensation != 0.0 && self.compensation.is_finite() {
            self.total + self.compensation
        } else {
            self.total
        }
    }
}

/// CPython 3.12's `sum` of `values` (`projections.figures.aggregates.compensated_sum`).
pub fn compensated_sum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut sum = Running::ZERO;
    values.into_iter().for_each(|value| sum.add(value));
    sum.finished()
}

/// `pow(value - mean, 2.0)`: `projections.kernels.square` of the deviation, the C library's
/// `pow` as `math.pow` calls it (+Infinity past the largest double, where `math.pow` raises).
fn squared_deviation(value: f64, mean: f64) -> f64 {
    // Through `black_box`, the exponent is not a constant the optimiser would turn
    // `pow(x, 2.0)` into `x * x` for: the two differ in the last bit of some values.
    let two = std::hint::black_box(2.0);
    // SAFETY: `pow` is the C library's, pure, defined for every pair of doubles.
    unsafe { pow(value - mean, two) }
}

/// The running sum, from zero, of the squared deviations of `values` from `mean`.
pub fn squares_sum(values: impl IntoIterator<Item = f64>, mean: f64) -> Running {
    let mut sum = Running::ZERO;
    values.into_iter().for_each(|value| sum.add(squared_deviation(value, mean)));
    sum
}

/// `projections.kernels.running_sum_in_python(values, total, compensation)`.
#[pyfunction]
pub fn running_sum(values: &Bound<'_, PyList>, total: f64, compensation: f64) -> Option<(f64, f64)> {
    let mut sum = Running { total, compensation };
    each_double(values, |value| sum.add(value)).then_some((sum.total, sum.compensation))
}

/// `finite_values(values)` and the running sum of those from `total` and `compensation`.
#[pyfunction]
pub fn finite_running_sum<'py>(
    values: &Bound<'py, PyList>,
    total: f64,
    compensation: f64,
) -> PyResult<Option<(Bound<'py, PyList>, f64, f64)>> {
    let mut sum = Running { total, compensation };
    let mut all_finite = true;
    let read = each_double(values, |value| {
        if value.is_finite() {
            sum.add(value)
        } else {
            all_finite = false;
        }
    });
    if !read {
        return Ok(None);
    }
    let listed = if all_finite {
        // The same items in the same order: a new list, since the caller's grows on.
        values.get_slice(0, values.len())
    } else {
        let kept: Vec<Bound<'py, PyAny>> = values
            .iter()
            .filter(|item| item.downcast_exact::<PyFloat>().is_ok_and(|float| float.value().is_finite()))
            .collect();
        PyList::new(values.py(), kept)?
    };
    Ok(Some((listed, sum.total, sum.compensation)))
}

/// The running sum, from zero, of `pow(value - mean, 2.0)` for each of `values`: the
/// squared deviations `projections.figures.aggregates.spread` sums (a square past the largest double
/// is +Infinity, which `math.pow` raises for and `square` then gives).
#[pyfunction]
pub fn squares_running_sum(values: &Bound<'_, PyList>, mean: f64) -> Option<(f64, f64)> {
    let mut sum = Running::ZERO;
    each_double(values, |value| sum.add(squared_deviation(value, mean))).then_some((sum.total, sum.compensation))
}
