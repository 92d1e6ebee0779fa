//! A range aggregate's figures (SEMANTICS.md section 4; `projections.figures.aggregates`, the
//! Python reference): the center (count, NaN count, compensated sum, mean), the spread
//! (population and sample variance) and the percentiles by section 4's rule, as plain
//! functions of doubles, with the same IEEE 754 operations in the same order as the Python.
//!
//! The percentiles are a kernel too (`projections.kernels.percentiles_in_python`, its twin):
//! the record's `percentiles` object, non-finite figures spelled as the wire strings.

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyFloat, PyList, PyString};

use crate::sums::{squares_sum, Running};

/// `projections.figures.aggregates.PERCENTILES`.
pub const PERCENTILES: [u32; 10] = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

/// The count, NaN count, sum and mean of an aggregate's finite values among `total`
/// (`aggregates.Center`): sum and mean None when there is no finite value.
pub struct Center {
    pub count: usize,
    pub nan_count: usize,
    pub sum: Option<f64>,
    pub mean: Option<f64>,
}

/// `aggregates.centered`: the center of the `finite` values among `total`, given their
/// compensated sum.
pub fn centered(count: usize, summed: f64, total: usize) -> Center {
    let nan_count = total.saturating_sub(count);
    if count == 0 {
        return Center { count, nan_count, sum: None, mean: None };
    }
    Center { count, nan_count, sum: Some(summed), mean: Some(summed / count as f64) }
}

/// The population and sample variance (None below two values) of an aggregate's finite
/// values (`aggregates.Spread`).
pub struct Spread {
    pub variance: f64,
    pub sample_variance: Option<f64>,
}

/// `aggregates.spread`: the compensated sum of the squared deviations of `finite` (not
/// empty) from `mean`, over the count (sample: the count - 1).
pub fn spread(finite: &[f64], mean: f64) -> Spread {
    let squares = squares_sum(finite.iter().copied(), mean).finished();
    let count = finite.len();
    Spread { variance: squares / count as f64, sample_variance: (count > 1).then(|| squares / (count - 1) as f64) }
}

/// `aggregates.finite_center_and_spread`: the center of values known to be finite among
/// `total`, and their spread around its mean (None: no value).
pub fn center_and_spread(finite: &[f64], total: usize) -> (Center, Option<Spread>) {
    let mut sum = Running::ZERO;
    finite.iter().for_each(|&value| sum.add(value));
    let middle = centered(finite.len(), sum.finished(), total);
    let spreads = middle.mean.map(|mean| spread(finite, mean));
    (middle, spreads)
}

/// Where section 4 puts percentile `p` among `n` sorted values: its index, or the index below
/// it and the fraction of the way to the next (`aggregates._positions`).
fn position(p: u32, n: usize) -> (usize, Option<f64>) {
    // p / 100 as Python divides two ints: both exact doubles, the quotient rounded once.
    let at = p as f64 / 100.0 * (n + 1) as f64 - 1.0;
    if at <= 0.0 {
        (0, None)
    } else if at >= (n - 1) as f64 {
        (n - 1, None)
    } else {
        let below = at as usize; // `int()`: toward zero, `at` being positive
        (below, Some(at - below as f64))
    }
}

/// Each of `PERCENTILES` of the `n` (> 0) sorted values read by `at(index)`, by section 4's
/// rule: the value at its position, interpolated toward the next value even at a whole
/// position (0.0 times an infinite difference is NaN, and -0.0 + 0.0 is 0.0). None where `at`
/// has no value for an index it is asked for.
pub fn percentiles_by(n: usize, at: impl Fn(usize) -> Option<f64>) -> Option<[f64; 10]> {
    let mut figures = [0.0; 10];
    for (figure, p) in figures.iter_mut().zip(PERCENTILES) {
        let (below, fraction) = position(p, n);
        let value = at(below)?;
        *figure = match fraction {
            Some(fraction) => value + fraction * (at(below + 1)? - value),
            None => value,
        };
    }
    Some(figures)
}

/// `percentiles`' labels, "p10" to "p100", made once.
static LABELS: GILOnceCell<[Py<PyString>; 10]> = GILOnceCell::new();

/// A figure as the records spell it (`events.nonfinite.wire_float`): itself when finite, else
/// "NaN", "Infinity" or "-Infinity".
fn wire_float(py: Python<'_>, value: f64) -> Bound<'_, PyAny> {
    if value.is_finite() {
        PyFloat::new(py, value).into_any()
    } else if value.is_nan() {
        intern!(py, "NaN").clone().into_any()
    } else if value > 0.0 {
        intern!(py, "Infinity").clone().into_any()
    } else {
        intern!(py, "-Infinity").clone().into_any()
    }
}

/// `projections.kernels.percentiles_in_python(ordered)`: None where `ordered` is empty or an
/// item it reads is not a float. Only the items at the percentiles' positions are read: a
/// metric output's list may hold a run's every value.
#[pyfunction]
#[pyo3(name = "percentiles")]
pub fn percentiles_of<'py>(ordered: &Bound<'py, PyList>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let py = ordered.py();
    let list = ordered.as_ptr();
    let n = ordered.len();
    if n == 0 {
        return Ok(None);
    }
    let figures = percentiles_by(n, |index| {
        // SAFETY: `index` is below `n`, the list's length, which no Python code runs to change
        // while the GIL is held here; the item is borrowed, not kept.
        unsafe {
            let item = ffi::PyList_GET_ITEM(list, index as ffi::Py_ssize_t);
            (ffi::PyFloat_CheckExact(item) != 0).then(|| ffi::PyFloat_AS_DOUBLE(item))
        }
    });
    let Some(figures) = figures else {
        return Ok(None);
    };
    let labels = LABELS.get_or_init(py, || PERCENTILES.map(|p| PyString::intern(py, &format!("p{p}")).unbind()));
    let record = PyDict::new(py);
    for (label, value) in labels.iter().zip(figures) {
        record.set_item(label.bind(py), wire_float(py, value))?;
    }
    Ok(Some(record))
}
