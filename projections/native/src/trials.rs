//! A trial id's index among a task's trial ids held as one string (`projections.kernels.trial_index_in_python`,
//! its twin, for `projections.packed.trial_ids`): a NUL, then each id followed by a NUL. In the compiled fold the Python
//! search builds the NUL-bounded needle, then searches and counts: ~1,900 instructions a
//! score on a task of five trials (measured with the needle built by two concatenations),
//! where a list of id objects took ~400. Here the held string is read in place, one
//! character a byte.

use pyo3::prelude::*;
use pyo3::types::{PyString, PyStringData};

/// The index of `trial_id` among the ids of `held`; when it is not there, -1 minus the
/// number of ids (the index it would take); None for what the Python search handles: a
/// string whose characters are not one byte each, an id holding a NUL or SOH (which the held
/// string escapes).
#[pyfunction]
pub fn trial_index(held: &Bound<'_, PyString>, trial_id: &Bound<'_, PyString>) -> Option<isize> {
    // SAFETY: both are str objects, immutable, borrowed for the length of this call; the
    // data is read in the width CPython stores it in, never converted or cached.
    let (PyStringData::Ucs1(held), PyStringData::Ucs1(id)) =
        (unsafe { held.data() }.ok()?, unsafe { trial_id.data() }.ok()?)
    else {
        return None;
    };
    if id.iter().any(|&character| character <= 1) {
        return None;
    }
    if held == b"\0" {
        return Some(-1);
    }
    let ids = held.strip_prefix(b"\0")?.strip_suffix(b"\0")?;
    let mut count = 0;
    for held_id in ids.split(|&character| character == 0) {
        if held_id == id {
            return Some(count);
        }
        count += 1;
    }
    Some(-1 - count)
}
