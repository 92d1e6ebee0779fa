//! `KeyTable`: the table `projections.applied.AppliedEvents` indexes a run's applied
//! fingerprints by, with the rules of `projections.applied.Keys` (its reference): an
//! open-addressing table of the keys of the fingerprints' `hi` halves (`key`), slots by key
//! modulo the width, linear probing, at a load of at most 3/4, the same width for the same
//! capacities.
//!
//! In the compiled fold each probe of `Keys`' `array` made an integer object of the slot it
//! read: ~500 instructions a probe, 3.4 probes an event on a 40k-trial run, and a growth
//! rehashed every key the same way. Here a probe is a load and a compare.

use pyo3::prelude::*;

const MIN_SLOTS: usize = 8;

#[pyclass(module = "events._native")]
pub struct KeyTable {
    slots: Vec<u32>,
    size: usize,
    limit: usize,
}

/// `Keys._allocate`'s width: room for `capacity` keys at a load of 3/4.
fn width_for(capacity: usize) -> usize {
    MIN_SLOTS.max(capacity.saturating_mul(4) / 3 + 1)
}

impl KeyTable {
    fn sized(capacity: usize) -> Self {
        let width = width_for(capacity);
        KeyTable { slots: vec![0; width], size: 0, limit: width * 3 / 4 }
    }

    fn home(&self, key: u32) -> usize {
        key as usize % self.slots.len()
    }

    fn next(&self, at: usize) -> usize {
        if at + 1 < self.slots.len() {
            at + 1
        } else {
            0
        }
    }

    /// The free slot `key` probes to, and whether a slot on the way holds it.
    fn free(&self, key: u32) -> (usize, bool) {
        let mut at = self.home(key);
        let mut seen = false;
        while self.slots[at] != 0 {
            seen |= self.slots[at] == key;
            at = self.next(at);
        }
        (at, seen)
    }

    fn place(&mut self, at: usize, key: u32) {
        self.slots[at] = key;
        self.size += 1;
        if self.size > self.limit {
            self.grow(self.size * 2);
        }
    }

    fn grow(&mut self, capacity: usize) {
        if capacity <= self.limit {
            return;
        }
        let old = std::mem::replace(self, KeyTable::sized(capacity));
        for key in old.slots.into_iter().filter(|&key| key != 0) {
            let (at, _) = self.free(key);
            self.slots[at] = key;
        }
        self.size = old.size;
    }
}

/// `projections.applied._key`: `hi`'s top 31 bits with the lowest set, never 0 (an empty slot).
fn key(hi: u64) -> u32 {
    (hi >> 33) as u32 | 1
}

#[pymethods]
impl KeyTable {
    #[new]
    fn new(capacity: usize) -> Self {
        KeyTable::sized(capacity)
    }

    /// Place `hi`'s key unless a slot holds it already: True when placed.
    fn add(&mut self, hi: u64) -> bool {
        let key = key(hi);
        let (at, seen) = self.free(key);
        if !seen {
            self.place(at, key);
        }
        !seen
    }

    /// Place `hi`'s key, known to stand for a fingerprint not indexed yet, even if a slot holds it.
    fn put(&mut self, hi: u64) {
        let key = key(hi);
        let (at, _) = self.free(key);
        self.place(at, key);
    }

    /// Whether a slot holds `hi`'s key.
    fn holds(&self, hi: u64) -> bool {
        self.free(key(hi)).1
    }

    /// Make room for `capacity` keys without growing again.
    fn reserve(&mut self, capacity: usize) {
        self.grow(capacity);
    }

    /// The slots, each 4 bytes.
    #[getter]
    fn width(&self) -> usize {
        self.slots.len()
    }

    fn __len__(&self) -> usize {
        self.size
    }
}
