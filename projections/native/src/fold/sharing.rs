//! One value for equal immutable parts the fold keeps per task (`projections.packed.sharing`,
//! the Python fold's way): most tasks of a run, and the runs of one harness, declare the same
//! keys and views, and a copy of them per task cost ~100 bytes a stored attempt.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// A value shared by whoever holds a clone of it; read through `Deref`, iterated as the value
/// is. Changed only by `make_mut`, which copies it first when it is shared.
#[derive(Debug, Default, PartialEq)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    pub fn new(value: T) -> Self {
        Shared(Arc::new(value))
    }

    /// Whether no one else holds it (neither another part nor `Recent`): its own bytes.
    pub fn unique(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

impl<T: Clone> Shared<T> {
    pub fn make_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'a, T> IntoIterator for &'a Shared<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        (&*self.0).into_iter()
    }
}

/// The most distinct values a `Recent` holds (`projections.packed.sharing.shared`'s cache).
const RECENT_MOST: usize = 4096;

/// The values shared lately, one for all that are equal: names the tasks of a run, and the
/// runs of one harness, repeat.
pub struct Recent<T>(LazyLock<Mutex<HashMap<T, Shared<T>>>>);

impl<T: Hash + Eq + Clone> Recent<T> {
    pub const fn new() -> Self {
        Recent(LazyLock::new(Mutex::default))
    }

    /// The value held equal to `value`, else `value` made one (and held).
    pub fn shared<Q: Hash + Eq + ToOwned<Owned = T> + ?Sized>(&self, value: &Q) -> Shared<T>
    where
        T: Borrow<Q>,
    {
        let mut recent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = recent.get(value) {
            return held.clone();
        }
        if recent.len() >= RECENT_MOST {
            recent.clear();
        }
        let made = Shared::new(value.to_owned());
        recent.insert(value.to_owned(), made.clone());
        made
    }
}
