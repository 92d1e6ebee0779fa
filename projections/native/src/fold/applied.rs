//! A run's index of its applied events' fingerprints, as
//! `projections.fold.redelivery.AppliedEvents` (its reference) keeps it: the keys of their
//! `hi` halves in a `keys::Keys`, 4 bytes a key up to `NARROW_KEYS` keys, the whole `hi`
//! past them (the table built again from the kept fingerprints), ~5.5 bytes an event once a
//! run.started has sized it, where a `HashSet<u64>` took 10 to 20. A key it holds is only a
//! candidate, which the caller confirms among the kept pairs.

use crate::keys::Keys;

/// The most keys a table holds 4 bytes wide (`redelivery.NARROW_KEYS`); past them, 8.
const NARROW_KEYS: usize = 1 << 16;
/// A new run's room (`redelivery.AppliedEvents`' default: `MIN_SLOTS // 2`).
const FIRST_ROOM: usize = 4;

pub struct Applied {
    keys: Keys,
}

impl Default for Applied {
    fn default() -> Self {
        Applied { keys: Keys::sized(FIRST_ROOM, false) }
    }
}

impl std::fmt::Debug for Applied {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Applied({} keys)", self.keys.len())
    }
}

impl Applied {
    /// Whether the run may have applied the event of this `hi` (a candidate).
    pub fn holds(&self, hi: u64) -> bool {
        self.keys.holds(hi)
    }

    /// Index a new event, whose pair is kept right after; `kept`: the run's kept fingerprints.
    pub fn put<'a, Kept: Iterator<Item = &'a [u8]>>(&mut self, hi: u64, kept: impl FnOnce() -> Kept) {
        self.keys.put(hi);
        if self.keys.len() > NARROW_KEYS && !self.keys.wide() {
            self.widen(2 * self.keys.len(), kept());
            self.keys.put(hi);
        }
    }

    /// Room for `capacity` events without growing again (a run.started knows its size).
    pub fn reserve<'a, Kept: Iterator<Item = &'a [u8]>>(&mut self, capacity: usize, kept: impl FnOnce() -> Kept) {
        if capacity > NARROW_KEYS && !self.keys.wide() {
            self.widen(capacity, kept());
        } else {
            self.keys.reserve(capacity);
        }
    }

    /// The index of a run's kept fingerprints (each applied event's once), with room for
    /// `capacity` (`AppliedEvents.of_kept`): what a restore rebuilds.
    pub fn of_kept<'a>(capacity: usize, kept: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut applied = Applied { keys: Keys::sized(capacity, capacity > NARROW_KEYS) };
        applied.index(kept);
        applied
    }

    /// The memory of the table (`AppliedEvents.table_bytes`).
    pub fn table_bytes(&self) -> usize {
        self.keys.width() * if self.keys.wide() { 8 } else { 4 }
    }

    /// Index the kept fingerprints again with 8-byte keys, in a table with room for `capacity`.
    fn widen<'a>(&mut self, capacity: usize, kept: impl Iterator<Item = &'a [u8]>) {
        self.keys = Keys::sized(capacity, true);
        self.index(kept);
    }

    /// Put the keys of the `kept` fingerprints, none indexed yet.
    fn index<'a>(&mut self, kept: impl Iterator<Item = &'a [u8]>) {
        for pairs in kept {
            for pair in pairs.chunks_exact(16) {
                self.keys.put(u64::from_le_bytes(pair[..8].try_into().expect("8 bytes")));
            }
        }
    }
}
