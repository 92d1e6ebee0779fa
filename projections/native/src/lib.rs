//! `projections._kernels`: the fold's loops compiled, each with its Python twin beside it in
//! `projections/kernels.py`, the module's one importer, which tests hold them to
//! (`tests/projections/test_kernels.py`).
//!
//! `event_fingerprint(event_id)` is the fold's digest of an event id, computed here where
//! `projections.kernels.digest_of_id` (its twin) calls hashlib through four method calls;
//! `KeyTable` (`keys.rs`) is the table the fold indexes those fingerprints by, `pairs.rs` how a
//! part keeps them; `sums.rs` the range aggregate's loops over a list of floats;
//! `transpose.rs` section 8's columns; `trials.rs` a trial id's search among a task's
//! (`projections.packed.trial_ids`); `fold` the fold's state in native code. The figures, as plain functions a native fold can call and
//! as kernels: `passk.rs` pass@k's and pass^k's per-task figures and a key's columns,
//! `ranges.rs` a range aggregate's center, spread and percentiles, `statistics.rs` section 8's
//! entries (with `t975.rs`, Student's t), `harbor.rs` Harbor's pass@k; `floats.rs` a float's
//! JSON text as orjson writes it, and its text as Python's `repr` writes it.

// The recogniser (a dependency: the fold reads events with it) brings its allocator, the
// one this module's memory comes from too.
use _native as _;
mod floats;
mod fold;
mod harbor;
mod keys;
mod pairs;
mod passk;
mod ranges;
mod statistics;
mod sums;
mod t975;
mod transpose;
mod trials;

use pyo3::prelude::*;

/// `projections.kernels.digest_of_id`: BLAKE2b with a 16-byte digest of the id's UTF-8 bytes,
/// read as two little-endian halves, the first with its lowest bit set (never 0).
#[pyfunction]
fn event_fingerprint(event_id: &str) -> (u64, u64) {
    let digest = blake2b_simd::Params::new().hash_length(16).hash(event_id.as_bytes());
    let (hi, lo) = digest.as_bytes().split_at(8);
    let half = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("a digest of 16 bytes"));
    (half(hi) | 1, half(lo))
}

#[pymodule]
fn _kernels(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<keys::KeyTable>()?;
    module.add_class::<fold::door::NativeTask>()?;
    module.add_class::<fold::door::NativeRun>()?;
    module.add_class::<fold::door::FoldReader>()?;
    // What a panic in the fold raises in Python (a BaseException): named here so that the
    // native step can tell a bug in the fold from an interrupt.
    module.add("PanicException", module.py().get_type::<pyo3::panic::PanicException>())?;
    module.add_function(wrap_pyfunction!(event_fingerprint, module)?)?;
    module.add_function(wrap_pyfunction!(sums::running_sum, module)?)?;
    module.add_function(wrap_pyfunction!(sums::finite_running_sum, module)?)?;
    module.add_function(wrap_pyfunction!(sums::squares_running_sum, module)?)?;
    module.add_function(wrap_pyfunction!(transpose::transposed, module)?)?;
    module.add_function(wrap_pyfunction!(pairs::with_pair, module)?)?;
    module.add_function(wrap_pyfunction!(trials::trial_index, module)?)?;
    module.add_function(wrap_pyfunction!(passk::pass_at_k_estimates, module)?)?;
    module.add_function(wrap_pyfunction!(passk::pass_hat_k_estimates, module)?)?;
    module.add_function(wrap_pyfunction!(passk::key_figures, module)?)?;
    module.add_function(wrap_pyfunction!(ranges::percentiles_of, module)?)?;
    module.add_function(wrap_pyfunction!(statistics::column_figures, module)?)?;
    module.add_function(wrap_pyfunction!(statistics::t975_of, module)?)?;
    module.add_function(wrap_pyfunction!(harbor::harbor_pass_at_k, module)?)?;
    module.add_function(wrap_pyfunction!(floats::float_repr_of, module)?)?;
    module.add_function(wrap_pyfunction!(floats::encode_float, module)?)
}
