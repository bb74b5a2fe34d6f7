//! Locks that survive a panicked holder: the state behind them stays usable (every writer leaves
//! it consistent between statements), so a poisoned lock is taken as it is, not propagated.

use std::sync::{Mutex, MutexGuard};

/// Lock `mutex`, ignoring poisoning.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
