//! A deadline for the work of one request, visible to the loops that could run long.
//!
//! The service runs a request's file I/O and parsing on the blocking pool under a deadline
//! (`--request-timeout`). Answering the client at the deadline is not enough: a blocking thread
//! cannot be cancelled from outside, so a walk that keeps going holds a pool slot (and a core)
//! long after nobody waits for it. [`within`] sets the deadline for the current thread and
//! [`expired`] lets the walks check it, so the work itself stops. Outside [`within`] (the CLI)
//! nothing ever expires.

use std::cell::Cell;
use std::time::Instant;

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Run `work` on this thread with `deadline` in force (the previous one is restored after).
pub fn within<T>(deadline: Instant, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|cell| cell.set(self.0));
        }
    }
    let _restore = Restore(DEADLINE.with(|cell| cell.replace(Some(deadline))));
    work()
}

/// True once the deadline of the current thread's work has passed.
pub fn expired() -> bool {
    DEADLINE.with(|cell| {
        cell.get()
            .is_some_and(|deadline| Instant::now() >= deadline)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_deadline_holds_inside_within_only() {
        assert!(!expired());
        let past = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(within(past, expired));
        assert!(!within(Instant::now() + Duration::from_secs(60), expired));
        assert!(!expired(), "restored after the work");
    }
}
