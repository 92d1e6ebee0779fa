//! pass@k and pass^k (SEMANTICS.md sections 2 and 8; `projections.figures.passk`, the Python
//! reference): a task's per-k figures from its (n, c), and a key's columns by k over its
//! measured tasks, each with its center, spread and section 8 entry.
//!
//! A task's n and c are at most 2^53 here, where an int is a double exactly: Python's `k / i`
//! of two such ints is then the one rounding of the quotient, as `f64` division is. Past it
//! (never a count of attempts) the kernels leave the input to their twins.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use rustc_hash::FxHashMap;

use crate::statistics::{column, figures_of, Column, ColumnFigures};

/// The largest n (and c) the kernels take: every int up to it is a double exactly.
pub const EXACT: u64 = 1 << 53;

/// A task's per-k figures for k = 1..n from its (n, c).
pub type Estimator = fn(u64, u64) -> Vec<f64>;

/// Per-task pass@k for k = 1..n: 1 - C(n-c, k) / C(n, k) in the product form
/// 1 - prod_{i=n-c+1..n} (1 - k/i), i ascending (the NeMo evaluator's floats); 1.0 when
/// n - c < k. `c` is at most `n`.
pub fn estimates(n: u64, c: u64) -> Vec<f64> {
    (1..=n)
        .map(|k| {
            if n - c < k {
                return 1.0;
            }
            let mut product = 1.0;
            for i in n - c + 1..=n {
                product *= 1.0 - k as f64 / i as f64;
            }
            1.0 - product
        })
        .collect()
}

/// Per-task pass^k for k = 1..n: prod_{i=0..k-1} (c-i)/(n-i), each k's product extending the
/// one before; 0.0 when c < k (where the product would reach -0.0). `c` is at most `n`.
pub fn hat_estimates(n: u64, c: u64) -> Vec<f64> {
    let mut figures = Vec::with_capacity(n as usize);
    let mut product = 1.0;
    for i in 0..n {
        if c <= i {
            figures.resize(n as usize, 0.0);
            break;
        }
        product *= (c - i) as f64 / (n - i) as f64;
        figures.push(product);
    }
    figures
}

/// For k = 1..the largest n, the figures of the tasks with n >= k, in the order of `measured`
/// (summary task order: it orders the compensated sums). `passk.by_k`.
pub fn by_k(measured: &[(u64, u64)], estimator: Estimator) -> Vec<Vec<f64>> {
    let mut columns: Vec<Vec<f64>> = Vec::new();
    // A run's tasks share a handful of (n, c): each one's figures are made once.
    let mut made: FxHashMap<(u64, u64), Vec<f64>> = FxHashMap::default();
    for &(n, c) in measured {
        let figures = made.entry((n, c)).or_insert_with(|| estimator(n, c));
        for (index, &figure) in figures.iter().enumerate() {
            if index == columns.len() {
                columns.push(Vec::new());
            }
            columns[index].push(figure);
        }
    }
    columns
}

/// A key's columns, k = 1..the largest n, from the (n, c) of its measured tasks in summary task
/// order and the count of its unmeasured ones: each column's center, spread and section 8
/// entry, as `passk.key_figures_of` makes them (without the columns it keeps from before).
pub fn key_columns(measured: &[(u64, u64)], unmeasured: usize, estimator: Estimator) -> Vec<Column> {
    by_k(measured, estimator)
        .into_iter()
        .enumerate()
        .map(|(index, values)| {
            let total = values.len() + unmeasured;
            column(index as u64 + 1, values, total)
        })
        .collect()
}

/// (n, c) within the kernels' domain: 0 <= c <= n <= 2^53.
fn tally(n: u64, c: u64) -> Option<(u64, u64)> {
    (c <= n && n <= EXACT).then_some((n, c))
}

/// The `tally` of two Python ints; None for anything else, an int past 64 bits included.
fn tally_of(n: &Bound<'_, PyAny>, c: &Bound<'_, PyAny>) -> Option<(u64, u64)> {
    tally(n.extract().ok()?, c.extract().ok()?)
}

/// `projections.kernels.pass_at_k_estimates_in_python(n, c)`: None outside 0 <= c <= n <= 2^53.
#[pyfunction]
pub fn pass_at_k_estimates<'py>(
    n_int: &Bound<'py, PyAny>,
    c_int: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some((n, c)) = tally_of(n_int, c_int) else {
        return Ok(None);
    };
    PyTuple::new(n_int.py(), estimates(n, c)).map(Some)
}

/// `projections.kernels.pass_hat_k_estimates_in_python(n, c)`: None outside 0 <= c <= n <= 2^53.
#[pyfunction]
pub fn pass_hat_k_estimates<'py>(
    n_int: &Bound<'py, PyAny>,
    c_int: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some((n, c)) = tally_of(n_int, c_int) else {
        return Ok(None);
    };
    PyTuple::new(n_int.py(), hat_estimates(n, c)).map(Some)
}

/// The (n, c) of a list of pairs of ints, each within the kernels' domain; None otherwise.
pub fn tallies(items: &Bound<'_, PyList>) -> Option<Vec<(u64, u64)>> {
    items.iter().map(|item| item.extract::<(u64, u64)>().ok().and_then(|(n, c)| tally(n, c))).collect()
}

/// A column as Python holds it: its values and their figures.
type HeldColumn<'py> = (Vec<f64>, ColumnFigures<'py>);

/// A key's columns, as `key_columns` makes them, for the tests that hold them to
/// `passk.key_figures_of`: pass@k's then pass^k's, each k's values and figures. None where an
/// item is not an (n, c) within the domain.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn key_figures<'py>(
    measured: &Bound<'py, PyList>,
    unmeasured: usize,
) -> PyResult<Option<(Vec<HeldColumn<'py>>, Vec<HeldColumn<'py>>)>> {
    let py = measured.py();
    let Some(measured) = tallies(measured) else {
        return Ok(None);
    };
    let held = |estimator: Estimator| -> PyResult<Vec<HeldColumn<'py>>> {
        key_columns(&measured, unmeasured, estimator)
            .into_iter()
            .map(|made| {
                let figures = figures_of(py, &made)?.expect("a column holds a task's figure at least");
                Ok((made.values, figures))
            })
            .collect()
    };
    Ok(Some((held(estimates)?, held(hat_estimates)?)))
}
