//! The names the recogniser reads again and again (a run id, task ids, metric types, output
//! names, a trial's id across its scores), each made a Python string once and handed out
//! again while it stays in a small direct-mapped table: no allocation and no UTF-8 decoding
//! for a name seen last time, and the fold's dict lookups with it compare one pointer and
//! reuse the hash the string keeps. The table has a fixed number of slots (a name takes the
//! slot of its hash, displacing what was there), and keeps names of at most `LONGEST` bytes
//! (ids and names are mostly far shorter; a longer one is made anew each time), so its memory
//! is bounded whatever the log: ~2 MB for names of ~20 bytes, ~7 MB at most.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyString;

const SLOTS: usize = 1 << 14;
const LONGEST: usize = 64;

/// A name as read and the Python string made of it.
type Slot = Option<(Box<str>, Py<PyString>)>;

pub struct Names {
    slots: Mutex<Vec<Slot>>,
}

impl Names {
    pub fn new() -> Self {
        Names { slots: Mutex::new((0..SLOTS).map(|_| None).collect()) }
    }

    /// `text` as a Python string: the one made last time if its slot still holds it.
    pub fn get<'py>(&self, py: Python<'py>, text: &str) -> Bound<'py, PyString> {
        if text.len() > LONGEST {
            return PyString::new(py, text);
        }
        // Called with the GIL held, so never contended: the lock only makes the table Sync.
        let Ok(mut slots) = self.slots.lock() else {
            return PyString::new(py, text);
        };
        let slot = &mut slots[slot_of(text)];
        if let Some((held, made)) = slot {
            if **held == *text {
                return made.bind(py).clone();
            }
        }
        let made = PyString::new(py, text);
        *slot = Some((text.into(), made.clone().unbind()));
        made
    }
}

/// FNV-1a of the bytes, folded to a slot: names differ mostly in their last characters
/// (task-00042, trial__3), which every byte of FNV mixes in.
fn slot_of(text: &str) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    ((hash >> 32) ^ hash) as usize & (SLOTS - 1)
}
