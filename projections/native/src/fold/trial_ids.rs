//! A task's trial ids in the order its scores first named them, held as the Python fold holds
//! them (`projections.packed.trial_ids`: one string, where an object per id cost ~20 bytes a
//! stored attempt): their text end to end, and where each ends. A `String` per id cost ~55
//! bytes an id (its 24 in the vector and its own block).

use std::ops::Index;

use super::snug;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrialIds {
    text: String,
    ends: Vec<u32>,
}

impl TrialIds {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(move |at| &self[at])
    }

    pub fn position(&self, trial_id: &str) -> Option<usize> {
        self.iter().position(|held| held == trial_id)
    }

    /// Room for `count` ids as long as `trial_id` (a task's plan, at its first id).
    pub fn reserve(&mut self, count: usize, trial_id: &str) {
        self.text.reserve_exact(count * trial_id.len());
        self.ends.reserve_exact(count);
    }

    /// The bytes its buffers hold (`stored::footprint`).
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * std::mem::size_of::<u32>()
    }

    /// Add `trial_id` after the others: its index.
    pub fn push(&mut self, trial_id: &str) -> usize {
        let room = self.text.len() + trial_id.len();
        if self.text.capacity() < room {
            self.text.reserve_exact(trial_id.len().max(self.text.capacity() / 8));
        }
        self.text.push_str(trial_id);
        let end = u32::try_from(self.text.len()).expect("a task's trial ids within 4 GiB");
        snug::push(&mut self.ends, end);
        self.ends.len() - 1
    }
}

impl Index<usize> for TrialIds {
    type Output = str;

    fn index(&self, at: usize) -> &str {
        let start = if at == 0 { 0 } else { self.ends[at - 1] as usize };
        &self.text[start..self.ends[at] as usize]
    }
}
