//! A queue bounded in bytes (and, when asked, in items) whose sender never waits.
//!
//! Why: the copies clawbridge takes off a forwarding path (a proxied line for the transcript and
//! the schema check, a WebSocket frame for the capture recorder) must never hold the forwarding
//! up, and must not grow without bound when their consumer is slow. An offer that does not fit
//! is refused at once (the caller counts or logs it) and costs nothing: the item is made only
//! once it fits. Each queued item holds its share of the budget until it is taken off.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The sending side (cheap to clone).
pub struct ByteSender<T> {
    sender: mpsc::UnboundedSender<Held<T>>,
    bytes: Arc<Semaphore>,
    items: Option<Arc<Semaphore>>,
}

impl<T> Clone for ByteSender<T> {
    fn clone(&self) -> Self {
        ByteSender {
            sender: self.sender.clone(),
            bytes: Arc::clone(&self.bytes),
            items: self.items.clone(),
        }
    }
}

/// The receiving side.
pub struct ByteReceiver<T> {
    receiver: mpsc::UnboundedReceiver<Held<T>>,
}

/// An item with the budget it holds (given back when it is taken off the queue).
struct Held<T> {
    item: T,
    _bytes: OwnedSemaphorePermit,
    _items: Option<OwnedSemaphorePermit>,
}

/// A queue of at most `bytes` bytes and, with `items`, at most that many items.
pub fn byte_queue<T>(bytes: usize, items: Option<usize>) -> (ByteSender<T>, ByteReceiver<T>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (
        ByteSender {
            sender,
            bytes: Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))),
            items: items.map(|items| Arc::new(Semaphore::new(items.min(Semaphore::MAX_PERMITS)))),
        },
        ByteReceiver { receiver },
    )
}

impl<T> ByteSender<T> {
    /// Queue the item `make` gives, counted as `size` bytes, if it fits; never waits. `false`
    /// (and `make` never called) when the budget is spent or the receiver is gone.
    pub fn offer_with(&self, size: usize, make: impl FnOnce() -> T) -> bool {
        let size = u32::try_from(size.max(1)).unwrap_or(u32::MAX);
        let Ok(bytes) = Arc::clone(&self.bytes).try_acquire_many_owned(size) else {
            return false;
        };
        let items = match &self.items {
            Some(items) => match Arc::clone(items).try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => return false,
            },
            None => None,
        };
        self.sender
            .send(Held {
                item: make(),
                _bytes: bytes,
                _items: items,
            })
            .is_ok()
    }

    /// [`ByteSender::offer_with`] for an item already made.
    pub fn offer(&self, size: usize, item: T) -> bool {
        self.offer_with(size, || item)
    }

    /// Bytes free in the budget now.
    pub fn free_bytes(&self) -> usize {
        self.bytes.available_permits()
    }
}

impl<T> ByteReceiver<T> {
    /// The next item; `None` once every sender is gone and the queue is empty.
    pub async fn recv(&mut self) -> Option<T> {
        self.receiver.recv().await.map(|held| held.item)
    }

    /// The next item, from a blocking thread.
    pub fn blocking_recv(&mut self) -> Option<T> {
        self.receiver.blocking_recv().map(|held| held.item)
    }

    /// The next item if one is queued already.
    pub fn try_recv(&mut self) -> Option<T> {
        self.receiver.try_recv().ok().map(|held| held.item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn offers_past_the_bytes_or_items_are_refused_unmade_and_taking_one_frees_its_share() {
        let (sender, mut receiver) = byte_queue::<Vec<u8>>(10, Some(2));
        assert!(sender.offer(6, vec![0; 6]));
        let mut made = false;
        assert!(
            !sender.offer_with(6, || {
                made = true;
                vec![0; 6]
            }),
            "past the bytes"
        );
        assert!(!made, "a refused item is never made");
        assert!(sender.offer(1, vec![1]));
        assert!(!sender.offer(1, vec![2]), "past the items");
        assert_eq!(sender.free_bytes(), 3);
        assert_eq!(receiver.recv().await.map(|item| item.len()), Some(6));
        assert_eq!(
            sender.free_bytes(),
            9,
            "taking an item gives its share back"
        );
        assert!(sender.offer(8, vec![0; 8]));
        assert_eq!(receiver.try_recv().map(|item| item.len()), Some(1));
        assert_eq!(receiver.try_recv().map(|item| item.len()), Some(8));
        assert_eq!(receiver.try_recv(), None);
        drop(receiver);
        assert!(!sender.offer(1, vec![1]), "nobody receives");
    }

    #[tokio::test]
    async fn an_empty_item_still_counts_and_the_receiver_ends_with_its_senders() {
        let (sender, mut receiver) = byte_queue::<()>(1, None);
        assert!(sender.offer(0, ()));
        assert!(!sender.offer(0, ()), "an empty item counts as one byte");
        drop(sender);
        assert_eq!(receiver.recv().await, Some(()));
        assert_eq!(receiver.recv().await, None);
    }
}
