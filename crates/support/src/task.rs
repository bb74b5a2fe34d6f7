//! Tasks with an owner.
//!
//! A task clawbridge spawns belongs to whoever started it: a [`Tasks`] is a `TaskTracker` (so
//! the owner can wait for what it started) and a `CancellationToken` (so it can stop it). Nothing
//! in `src/` calls `tokio::spawn` directly: a task nobody owns outlives the thing it served, and
//! nothing waits for the file it was writing (`tests/it/layers.rs` greps for it).
//!
//! [`Tasks::spawn`] tracks a task that ends by itself (a writer that ends when its queue
//! closes); [`Tasks::spawn_cancellable`] one that is also dropped when the owner cancels (a
//! server's accept loop, a connection's pumps).

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

/// An owner's tasks: tracked, and cancelled together.
#[derive(Clone, Debug, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl Tasks {
    pub fn new() -> Self {
        Self::default()
    }

    /// A task that ends by itself; tracked, so [`Tasks::join`] waits for it.
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(future)
    }

    /// A task that stops at its next await once the owner cancels (its output is then `None`).
    pub fn spawn_cancellable<F>(&self, future: F) -> JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let cancel = self.cancel.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                output = future => Some(output),
                () = cancel.cancelled() => None,
            }
        })
    }

    /// Blocking work on the blocking pool, tracked.
    pub fn spawn_blocking<F, T>(&self, work: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.tracker.spawn_blocking(work)
    }

    /// The token the owner cancels with (for tasks that select on it themselves).
    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Cancels these tasks when dropped (a server that stops when its handle goes).
    pub fn drop_guard(&self) -> DropGuard {
        self.cancel.clone().drop_guard()
    }

    /// Wait, at most `within`, for every task to end by itself; true when they all did.
    pub async fn join(&self, within: Duration) -> bool {
        self.tracker.close();
        let ended = tokio::time::timeout(within, self.tracker.wait())
            .await
            .is_ok();
        self.tracker.reopen();
        ended
    }

    /// Cancel, then wait at most `within` for every task to end; true when they all did.
    pub async fn shutdown(&self, within: Duration) -> bool {
        self.cancel.cancel();
        self.join(within).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn cancelling_stops_cancellable_tasks_and_join_waits_for_the_rest() {
        let tasks = Tasks::new();
        let forever = tasks.spawn_cancellable(std::future::pending::<()>());
        let (done, finished) = tokio::sync::oneshot::channel();
        let writer = tasks.spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let _ = done.send(());
            7
        });
        assert!(
            !tasks.join(Duration::from_secs(1)).await,
            "a task still runs"
        );
        assert!(tasks.shutdown(Duration::from_secs(10)).await);
        assert_eq!(forever.await.expect("joined"), None);
        assert_eq!(
            writer.await.expect("joined"),
            7,
            "a plain task is not cut short"
        );
        assert!(finished.await.is_ok());
    }
}
