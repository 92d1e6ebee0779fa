//! Section 8's entries (SEMANTICS.md; `projections.figures.statistics`, the Python reference):
//! one k's count, NaN count, mean, standard error and 95% interval from the center and spread
//! of its tasks' figures, and a column of figures made into all of them at once (the kernel
//! `column_figures`, whose twin is `projections.kernels.column_figures_in_python`).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::ranges::{center_and_spread, Center, Spread};
use crate::sums::each_double;
use crate::t975::t975;

/// One k's entry of section 8 (`{"k", "count", "nan_count", "mean", "stderr", "ci95_low",
/// "ci95_high"}`); the figures None where there is no finite value, or (stderr and the
/// interval) only one.
pub struct Entry {
    pub k: u64,
    pub count: usize,
    pub nan_count: usize,
    pub mean: Option<f64>,
    pub stderr: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// `min(1.0, max(0.0, value))` as Python picks: `max` keeps 0.0 unless `value` is greater
/// (NaN and -0.0 are not), `min` keeps 1.0 unless the other is less.
fn clip(value: f64) -> f64 {
    let raised = if value > 0.0 { value } else { 0.0 };
    if raised < 1.0 {
        raised
    } else {
        1.0
    }
}

/// `statistics.entry(k, middle, spreads)`: the standard error is the sample standard deviation
/// over the square root of the count, the interval the mean +- t975(count - 1) times it,
/// clipped to [0, 1].
pub fn entry(k: u64, middle: &Center, spreads: Option<&Spread>) -> Entry {
    let mut figures = Entry {
        k,
        count: middle.count,
        nan_count: middle.nan_count,
        mean: middle.mean,
        stderr: None,
        low: None,
        high: None,
    };
    if let (Some(mean), Some(sample_variance)) = (middle.mean, spreads.and_then(|spreads| spreads.sample_variance)) {
        let stderr = sample_variance.sqrt() / (middle.count as f64).sqrt();
        // A sample variance means two values or more: t975 has a degree of freedom.
        let margin = t975(middle.count as u64 - 1).expect("a sample variance of two values or more") * stderr;
        figures.stderr = Some(stderr);
        figures.low = Some(clip(mean - margin));
        figures.high = Some(clip(mean + margin));
    }
    figures
}

/// One k's column of per-task figures (finite, in summary task order) with its center, spread
/// and entry: what `projections.figures.passk.Column` keeps.
pub struct Column {
    pub values: Vec<f64>,
    pub middle: Center,
    pub spreads: Option<Spread>,
    pub entry: Entry,
}

/// The column at `k` of `values` among `total` tasks (the rest unmeasured, counted as NaN).
pub fn column(k: u64, values: Vec<f64>, total: usize) -> Column {
    let (middle, spreads) = center_and_spread(&values, total);
    let entry = entry(k, &middle, spreads.as_ref());
    Column { values, middle, spreads, entry }
}

/// The entry as the JSON-ready dict `statistics.entry` makes, keys in the contract's order.
pub fn entry_dict<'py>(py: Python<'py>, figures: &Entry) -> PyResult<Bound<'py, PyDict>> {
    // The keys made once (`intern!`): a progress event makes an entry per k of every key.
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "k"), figures.k)?;
    dict.set_item(intern!(py, "count"), figures.count)?;
    dict.set_item(intern!(py, "nan_count"), figures.nan_count)?;
    dict.set_item(intern!(py, "mean"), figures.mean)?;
    dict.set_item(intern!(py, "stderr"), figures.stderr)?;
    dict.set_item(intern!(py, "ci95_low"), figures.low)?;
    dict.set_item(intern!(py, "ci95_high"), figures.high)?;
    Ok(dict)
}

/// A column's figures as `projections.kernels.column_figures_in_python` gives them: (sum,
/// mean, variance, sample variance, entry), for a column of at least one value.
pub type ColumnFigures<'py> = (f64, f64, f64, Option<f64>, Bound<'py, PyDict>);

/// The figures of a column held in Python.
pub fn figures_of<'py>(py: Python<'py>, made: &Column) -> PyResult<Option<ColumnFigures<'py>>> {
    let (Some(sum), Some(mean), Some(spreads)) = (made.middle.sum, made.middle.mean, made.spreads.as_ref()) else {
        return Ok(None);
    };
    Ok(Some((sum, mean, spreads.variance, spreads.sample_variance, entry_dict(py, &made.entry)?)))
}

/// `projections.kernels.column_figures_in_python(values, total, k)`: None where `values` is
/// empty or holds anything but floats.
#[pyfunction]
pub fn column_figures<'py>(values: &Bound<'py, PyList>, total: usize, k: u64) -> PyResult<Option<ColumnFigures<'py>>> {
    let mut doubles = Vec::with_capacity(values.len());
    if !each_double(values, |value| doubles.push(value)) || doubles.is_empty() {
        return Ok(None);
    }
    figures_of(values.py(), &column(k, doubles, total))
}

/// `projections.figures.t975.t975(df)`, for the tests that hold the table to Python's.
#[pyfunction]
#[pyo3(name = "t975")]
pub fn t975_of(df: u64) -> PyResult<f64> {
    t975(df).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!("Student's t needs at least one degree of freedom, got {df}"))
    })
}
