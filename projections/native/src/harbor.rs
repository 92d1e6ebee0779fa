//! Harbor's pass@k (SEMANTICS.md section 6; `projections.kernels.harbor_pass_at_k_in_python`,
//! the Python reference and the kernel's twin): its ks, its per-task estimate multiplied in
//! its own order, and its mean over a key's tasks added as Python >= 3.12's `sum` does.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::passk::tallies;
use crate::sums::compensated_sum;

/// Harbor's ks: 2, 4, 8, ... and 5, 10, 15, ..., up to `smallest_n`, ascending.
pub fn k_values(smallest_n: u64) -> Vec<u64> {
    let mut ks: Vec<u64> = (5..=smallest_n).step_by(5).collect();
    let mut k = 2;
    // A power of two is never a multiple of 5: no k twice.
    while k <= smallest_n {
        ks.push(k);
        k *= 2;
    }
    ks.sort_unstable();
    ks
}

/// Harbor's per-task pass@k: 1 - prod(i = 0..k-1) (n-c-i)/(n-i), multiplied in that order;
/// 1.0 when n - c < k. `c` is at most `n`, both at most 2^53.
pub fn estimate(n: u64, c: u64, k: u64) -> f64 {
    if n - c < k {
        return 1.0;
    }
    let mut product = 1.0;
    for i in 0..k {
        product *= (n - c - i) as f64 / (n - i) as f64;
    }
    1.0 - product
}

/// Harbor's pass@k per k of a key whose tasks have the (n, c) `tallies` (not empty), in task
/// order: (k, the mean of the tasks' estimates added in that order). Each distinct (n, c) is
/// estimated once per k.
pub fn pass_at_k(tallies: &[(u64, u64)]) -> Vec<(u64, f64)> {
    let smallest = tallies.iter().map(|&(n, _)| n).min().expect("a key's tasks, at least one");
    k_values(smallest)
        .into_iter()
        .map(|k| {
            let mut estimated: HashMap<(u64, u64), f64> = HashMap::new();
            let figures = tallies.iter().map(|&(n, c)| *estimated.entry((n, c)).or_insert_with(|| estimate(n, c, k)));
            (k, compensated_sum(figures) / tallies.len() as f64)
        })
        .collect()
}

/// `projections.kernels.harbor_pass_at_k_in_python(tallies)`: {str(k): figure}; None where
/// `tallies` is empty or an item is not an (n, c) with 0 <= c <= n <= 2^53.
#[pyfunction]
pub fn harbor_pass_at_k<'py>(tallies_list: &Bound<'py, PyList>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(held) = tallies(tallies_list).filter(|held| !held.is_empty()) else {
        return Ok(None);
    };
    let figures = PyDict::new(tallies_list.py());
    for (k, figure) in pass_at_k(&held) {
        figures.set_item(k.to_string(), figure)?;
    }
    Ok(Some(figures))
}
