//! `KeyTable`: the table `projections.fold.redelivery.AppliedEvents` indexes a run's applied
//! fingerprints by, with the rules of `projections.kernels.Keys` (its twin): an
//! open-addressing table of the keys of the fingerprints' `hi` halves (`Slot::of`), slots by
//! key modulo the width, linear probing, at a load of at most 3/4, the same width for the
//! same capacities; keys of 4 bytes, or of 8 for a wide table. The native fold's runs index
//! their applied events in the same tables (`fold::applied`).
//!
//! In the compiled fold each probe of `Keys`' `array` made an integer object of the slot it
//! read: ~500 instructions a probe, 3.4 probes an event on a 40k-trial run, and a growth
//! rehashed every key the same way. Here a probe is a load and a compare.

use pyo3::prelude::*;

const MIN_SLOTS: usize = 8;

/// A slot's key: never 0, which marks an empty slot.
trait Slot: Copy + PartialEq {
    const EMPTY: Self;
    fn of(hi: u64) -> Self;
    fn home(self, width: usize) -> usize;
}

/// `projections.kernels._key` of a narrow table: `hi`'s top 31 bits with the lowest set.
impl Slot for u32 {
    const EMPTY: u32 = 0;
    fn of(hi: u64) -> u32 {
        (hi >> 33) as u32 | 1
    }
    fn home(self, width: usize) -> usize {
        self as usize % width
    }
}

/// ... of a wide table: the whole `hi` with the lowest bit set (as fingerprints make it).
impl Slot for u64 {
    const EMPTY: u64 = 0;
    fn of(hi: u64) -> u64 {
        hi | 1
    }
    fn home(self, width: usize) -> usize {
        (self % width as u64) as usize
    }
}

struct Table<T> {
    slots: Vec<T>,
    size: usize,
    limit: usize,
}

/// `Keys._allocate`'s width: room for `capacity` keys at a load of 3/4.
fn width_for(capacity: usize) -> usize {
    MIN_SLOTS.max(capacity.saturating_mul(4) / 3 + 1)
}

impl<T: Slot> Table<T> {
    fn sized(capacity: usize) -> Self {
        let width = width_for(capacity);
        Table { slots: vec![T::EMPTY; width], size: 0, limit: width * 3 / 4 }
    }

    fn next(&self, at: usize) -> usize {
        if at + 1 < self.slots.len() {
            at + 1
        } else {
            0
        }
    }

    /// The free slot `key` probes to, and whether a slot on the way holds it.
    fn free(&self, key: T) -> (usize, bool) {
        let mut at = key.home(self.slots.len());
        let mut seen = false;
        while self.slots[at] != T::EMPTY {
            seen |= self.slots[at] == key;
            at = self.next(at);
        }
        (at, seen)
    }

    fn place(&mut self, at: usize, key: T) {
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
        let old = std::mem::replace(self, Table::sized(capacity));
        for key in old.slots.into_iter().filter(|&key| key != T::EMPTY) {
            let (at, _) = self.free(key);
            self.slots[at] = key;
        }
        self.size = old.size;
    }

    fn add(&mut self, hi: u64) -> bool {
        let key = T::of(hi);
        let (at, seen) = self.free(key);
        if !seen {
            self.place(at, key);
        }
        !seen
    }

    fn put(&mut self, hi: u64) {
        let key = T::of(hi);
        let (at, _) = self.free(key);
        self.place(at, key);
    }

    fn holds(&self, hi: u64) -> bool {
        self.free(T::of(hi)).1
    }
}

enum Tables {
    Narrow(Table<u32>),
    Wide(Table<u64>),
}

/// The same call on whichever table it is.
macro_rules! on_table {
    ($tables:expr, $table:ident => $call:expr) => {
        match $tables {
            Tables::Narrow($table) => $call,
            Tables::Wide($table) => $call,
        }
    };
}

/// A table of either width: the native fold's runs' (`fold::applied`) and `KeyTable`'s.
pub(crate) struct Keys(Tables);

impl Keys {
    pub(crate) fn sized(capacity: usize, wide: bool) -> Self {
        Keys(if wide { Tables::Wide(Table::sized(capacity)) } else { Tables::Narrow(Table::sized(capacity)) })
    }

    /// Place `hi`'s key unless a slot holds it already: true when placed.
    pub(crate) fn add(&mut self, hi: u64) -> bool {
        on_table!(&mut self.0, table => table.add(hi))
    }

    /// Place `hi`'s key, known to stand for a fingerprint not indexed yet, even if a slot holds it.
    pub(crate) fn put(&mut self, hi: u64) {
        on_table!(&mut self.0, table => table.put(hi))
    }

    /// Whether a slot holds `hi`'s key.
    pub(crate) fn holds(&self, hi: u64) -> bool {
        on_table!(&self.0, table => table.holds(hi))
    }

    /// Make room for `capacity` keys without growing again.
    pub(crate) fn reserve(&mut self, capacity: usize) {
        on_table!(&mut self.0, table => table.grow(capacity))
    }

    pub(crate) fn width(&self) -> usize {
        on_table!(&self.0, table => table.slots.len())
    }

    pub(crate) fn wide(&self) -> bool {
        matches!(self.0, Tables::Wide(_))
    }

    pub(crate) fn len(&self) -> usize {
        on_table!(&self.0, table => table.size)
    }
}

#[pyclass(module = "projections._kernels")]
pub struct KeyTable {
    table: Keys,
}

#[pymethods]
impl KeyTable {
    #[new]
    #[pyo3(signature = (capacity, wide = false))]
    fn new(capacity: usize, wide: bool) -> Self {
        KeyTable { table: Keys::sized(capacity, wide) }
    }

    /// Place `hi`'s key unless a slot holds it already: True when placed.
    fn add(&mut self, hi: u64) -> bool {
        self.table.add(hi)
    }

    /// Place `hi`'s key, known to stand for a fingerprint not indexed yet, even if a slot holds it.
    fn put(&mut self, hi: u64) {
        self.table.put(hi)
    }

    /// Whether a slot holds `hi`'s key.
    fn holds(&self, hi: u64) -> bool {
        self.table.holds(hi)
    }

    /// Make room for `capacity` keys without growing again.
    fn reserve(&mut self, capacity: usize) {
        self.table.reserve(capacity)
    }

    /// The slots.
    #[getter]
    fn width(&self) -> usize {
        self.table.width()
    }

    /// Whether keys are the whole `hi` (8 bytes a slot), not its top 31 bits (4).
    #[getter]
    fn wide(&self) -> bool {
        self.table.wide()
    }

    fn __len__(&self) -> usize {
        self.table.len()
    }
}
