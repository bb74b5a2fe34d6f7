//! The order of a thread's subscription on one app-server: Codex subscribes the endpoint's
//! connection to a thread when it is resumed there and unsubscribes it on `thread/unsubscribe`,
//! one subscription for every client the endpoint relays the thread to. When a client that
//! followed a thread leaves as another connects and resumes it (an agent that reconnects for each
//! turn), the endpoint's unsubscribe for the first must not reach Codex after the second's
//! resume: Codex would then send the second client's turn nothing (the replica soak saw a turn
//! answered and then silent for a minute). So an unsubscribe is sent only while no request about
//! the thread is on its way to that app-server, and a request about it waits for an unsubscribe
//! being sent to be answered first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::feed::FeedKey;
use crate::support::sync::lock;

/// One thread on one app-server incarnation: its requests on their way, and an unsubscribe
/// being sent (its end: the sender is dropped when Codex has answered).
#[derive(Default)]
struct Gate {
    in_flight: usize,
    unsubscribing: Option<watch::Receiver<()>>,
}

/// The gates of the threads some request or unsubscribe is about now; an entry goes when its
/// last one ends, so the map holds no more than the requests in flight.
#[derive(Default)]
pub(super) struct Gates {
    gates: Arc<Mutex<HashMap<FeedKey, Gate>>>,
}

/// A thread's gate held: by a request on its way to the thread's app-server (from before it is
/// sent until its answer has been handled and the connection follows the thread), or by an
/// unsubscribe being sent (requests about the thread wait until it is dropped).
pub(super) struct Held {
    gates: Arc<Mutex<HashMap<FeedKey, Gate>>>,
    key: FeedKey,
    /// An unsubscribe's: dropped last, it wakes the requests that wait.
    unsubscribing: Option<watch::Sender<()>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut gates = lock(&self.gates);
        if let Some(gate) = gates.get_mut(&self.key) {
            if self.unsubscribing.is_some() {
                gate.unsubscribing = None;
            } else {
                gate.in_flight = gate.in_flight.saturating_sub(1);
            }
            if gate.in_flight == 0 && gate.unsubscribing.is_none() {
                gates.remove(&self.key);
            }
        }
    }
}

impl Gates {
    /// A request about `key`'s thread is about to be sent: after any unsubscribe of it being
    /// sent has been answered.
    pub(super) async fn enter(&self, key: FeedKey) -> Held {
        loop {
            let waiting = {
                let mut gates = lock(&self.gates);
                let gate = gates.entry(key.clone()).or_default();
                match &gate.unsubscribing {
                    Some(done) => done.clone(),
                    None => {
                        gate.in_flight += 1;
                        break;
                    }
                }
            };
            let mut waiting = waiting;
            // Resolves (with an error) once the unsubscribe's guard is dropped.
            let _ = waiting.changed().await;
        }
        Held {
            gates: Arc::clone(&self.gates),
            key,
            unsubscribing: None,
        }
    }

    /// The right to send an unsubscribe of `key`'s thread now, unless a request about it is on
    /// its way or `wanted` says someone follows it again (both read under one lock, so no
    /// request can slip in between).
    pub(super) fn unsubscribe(&self, key: FeedKey, wanted: impl FnOnce() -> bool) -> Option<Held> {
        let mut gates = lock(&self.gates);
        if gates.get(&key).is_some_and(|gate| gate.in_flight > 0) || wanted() {
            return None;
        }
        let gate = gates.entry(key.clone()).or_default();
        if gate.unsubscribing.is_some() {
            // Another unsubscribe of it is being sent already.
            return None;
        }
        let (done, waiting) = watch::channel(());
        gate.unsubscribing = Some(waiting);
        Some(Held {
            gates: Arc::clone(&self.gates),
            key,
            unsubscribing: Some(done),
        })
    }

    /// Threads with a request or an unsubscribe under way (for the tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.gates).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key() -> FeedKey {
        (1, "thread-1".to_string())
    }

    /// The rule: no unsubscribe while a request about the thread is on its way.
    #[tokio::test]
    async fn no_unsubscribe_while_a_request_is_on_its_way() {
        let gates = Gates::default();
        let request = gates.enter(key()).await;
        assert!(gates.unsubscribe(key(), || false).is_none());
        drop(request);
        assert!(gates.unsubscribe(key(), || false).is_some());
    }

    /// Nor when someone follows the thread again.
    #[tokio::test]
    async fn no_unsubscribe_of_a_thread_followed_again() {
        let gates = Gates::default();
        assert!(gates.unsubscribe(key(), || true).is_none());
        assert_eq!(gates.len(), 0, "nothing kept");
    }

    /// The other way: a request waits until the unsubscribe being sent is done, then goes;
    /// nothing is kept once both end.
    #[tokio::test]
    async fn a_request_waits_for_the_unsubscribe_being_sent() {
        let gates = Arc::new(Gates::default());
        let unsubscribing = gates.unsubscribe(key(), || false).expect("may unsubscribe");
        let waiting = tokio::spawn({
            let gates = Arc::clone(&gates);
            async move { gates.enter(key()).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "the request went before the unsubscribe ended"
        );
        drop(unsubscribing);
        let request = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the request goes once the unsubscribe is done")
            .expect("joined");
        drop(request);
        assert_eq!(gates.len(), 0, "nothing kept");
    }
}
