//! A mutex's guard, whatever became of the thread that held it before.

use std::sync::{Mutex, MutexGuard};

/// The guard of `mutex`, also after a panic while another thread held it: the data it
/// guards are kept consistent by every holder before any step that may panic, so a
/// poisoned lock is taken as it stands.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
