//! Growth of the buffers the fold keeps per task and per run: by an eighth of what they hold
//! (at least what is added), where a `Vec` doubles. A task's buffers stop growing wherever
//! its events stop, so a doubled one kept up to half of itself unused for good: ~45 B a
//! stored attempt on runs of 8 trials a task, its records, fingerprints and output names.
//! An eighth keeps the copies amortised O(1), as CPython's lists grow, in more and smaller
//! reallocations; a declared task skips them, sized for its plan (`TaskState::planned`).

/// Room for `more` items after what `held` holds.
fn room<T>(held: &mut Vec<T>, more: usize) {
    if held.capacity() - held.len() < more {
        held.reserve_exact(more.max(held.capacity() / 8));
    }
}

/// `held` with `items` after what it holds.
pub fn extend<T: Copy>(held: &mut Vec<T>, items: &[T]) {
    room(held, items.len());
    held.extend_from_slice(items);
}

/// `held` with `item` after what it holds.
pub fn push<T>(held: &mut Vec<T>, item: T) {
    room(held, 1);
    held.push(item);
}
