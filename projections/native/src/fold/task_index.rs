//! A run's tasks by id without a second copy of each id: the place of a task in the run's
//! list by a 64-bit hash of its id, the id itself read from the task. A map of id strings
//! cost ~85 bytes a task (the entry and the copy); this ~28. An id whose hash another id
//! took first is kept by its text, apart, so that a collision costs room, never a task.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

use super::run::Task;

#[derive(Debug, Default)]
pub struct TaskIndex {
    by_hash: HashMap<u64, u32>,
    collided: HashMap<String, u32>,
}

fn hash(task_id: &str) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(task_id)
}

impl TaskIndex {
    /// The place of task `task_id` among `tasks`, the run's.
    pub fn get(&self, task_id: &str, tasks: &[Task]) -> Option<usize> {
        match self.by_hash.get(&hash(task_id)) {
            Some(&at) if tasks[at as usize].state.task_id == task_id => Some(at as usize),
            Some(_) => self.collided.get(task_id).map(|&at| at as usize),
            None => None,
        }
    }

    /// Index task `task_id`, not indexed yet, at `at`.
    pub fn insert(&mut self, task_id: &str, at: usize) {
        let at = u32::try_from(at).expect("a run's tasks within 2**32");
        if let Some(held) = self.by_hash.insert(hash(task_id), at) {
            self.by_hash.insert(hash(task_id), held);
            self.collided.insert(task_id.to_owned(), at);
        }
    }

    /// The bytes its tables hold (`stored::footprint`): a slot an entry and its control byte,
    /// at most 7 in 8 slots used.
    pub fn heap_bytes(&self) -> usize {
        let collided: usize = self.collided.keys().map(String::capacity).sum();
        (self.by_hash.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
            + self.collided.capacity() * (std::mem::size_of::<(String, u32)>() + 1))
            * 8
            / 7
            + collided
    }

    pub fn reserve(&mut self, more: usize) {
        self.by_hash.reserve(more);
    }
}
