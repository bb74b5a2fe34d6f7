//! Leases of threads across the endpoints of one shared store (`--store postgres://`): Codex
//! allows one writer per thread, so an endpoint serves a thread only while it holds the
//! thread's lease (its holder id, an epoch that rises each time the thread passes to another
//! endpoint, an expiry on the database's clock).
//!
//! - A request about a thread takes (or keeps) its lease first; while another live endpoint
//!   holds it the request is refused naming the holder and what is left of its lease.
//! - Held leases are renewed every quarter of their time while this endpoint follows the
//!   thread; one this endpoint no longer follows is let go, so another endpoint may take it at
//!   once.
//! - This endpoint trusts a lease for three quarters of its time from when it asked: a relay of
//!   the thread's messages past that (the endpoint was paused, partitioned or slow) renews it
//!   first, and when another endpoint took it, relays nothing more of the thread, tells its
//!   followers, and lets the thread go on its member ([`super::Shared::fence`]).
//!
//! With the embedded store there is one endpoint per state dir, and no leases.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::service::store::{LeaseTaken, Store};
use crate::support::sync::lock;

/// How long a lease lasts by default.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// One lease this endpoint holds: its epoch and until when it trusts it.
#[derive(Clone, Copy, Debug)]
struct Held {
    epoch: u64,
    trusted_until: Instant,
    /// Another endpoint took it: nothing of the thread is relayed until it is claimed again
    /// (kept, not removed, so no relay reads "not leased" and goes on while it is fenced).
    lost: bool,
}

/// This endpoint's leases.
pub(super) struct Leases {
    store: Arc<Store>,
    /// This endpoint's id in the leases (host, pid and a random part).
    holder: String,
    ttl: Duration,
    held: Mutex<HashMap<String, Held>>,
}

/// What a relay of a thread's message may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Relay {
    Go,
    /// Another endpoint holds the thread now.
    Lost,
}

impl Leases {
    /// Leases over `store`, when it is shared (else `None`: nothing to lease).
    pub(super) fn new(store: Option<Arc<Store>>, ttl: Duration) -> Option<Leases> {
        let store = store.filter(|store| store.is_shared())?;
        let mut random = [0u8; 4];
        let _ = getrandom::fill(&mut random);
        let holder = format!(
            "{}:{}:{}",
            crate::service::store::host_name(),
            std::process::id(),
            crate::support::hex::encode(&random)
        );
        Some(Leases {
            store,
            holder,
            ttl: ttl.max(Duration::from_secs(1)),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// What the status shows: this endpoint, its leases, and the fleet's live holders (read
    /// from the store: blocking).
    pub(super) fn status(&self) -> super::status::LeasesStatus {
        let mut held: Vec<super::status::HeldLease> = lock(&self.held)
            .iter()
            .filter(|(_, lease)| !lease.lost)
            .map(|(thread, lease)| super::status::HeldLease {
                thread: thread.clone(),
                epoch: lease.epoch,
            })
            .collect();
        held.sort_by(|a, b| a.thread.cmp(&b.thread));
        super::status::LeasesStatus {
            endpoint: self.holder.clone(),
            state_dir: None,
            ttl_seconds: self.ttl.as_secs(),
            held,
            fleet: self.store.live_lease_holders().into_iter().collect(),
            threads: self
                .store
                .live_leases(super::status::SHOWN_FLEET_LEASES)
                .into_iter()
                .map(
                    |(thread, holder, epoch, left_ms)| super::status::FleetLease {
                        thread,
                        holder,
                        epoch,
                        seconds_left: u64::try_from(left_ms.max(0)).unwrap_or(0).div_ceil(1000),
                    },
                )
                .collect(),
        }
    }

    /// A lost lease's thread was fenced (its followers let it go): its entry goes.
    pub(super) fn forget(&self, thread: &str) {
        let mut held = lock(&self.held);
        if held.get(thread).is_some_and(|held| held.lost) {
            held.remove(thread);
        }
    }

    pub(super) fn holder(&self) -> &str {
        &self.holder
    }

    pub(super) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The lease of `thread` for this endpoint, taken or kept; the refusal to give the client
    /// when another endpoint holds it. A lease held elsewhere is waited for once, up to its
    /// time: an endpoint that died (or whose client left it) lets it run out, and the client
    /// that reconnected here gets its thread a moment later instead of an error; one still
    /// renewed by a live endpoint that follows the thread is refused after the wait.
    pub(super) fn claim(&self, thread: &str) -> Result<(), String> {
        match self.try_claim(thread) {
            Err((_, Some(left))) if left <= self.ttl => {
                std::thread::sleep(left + Duration::from_millis(100));
                self.try_claim(thread).map_err(|(refusal, _)| refusal)
            }
            other => other.map_err(|(refusal, _)| refusal),
        }
    }

    /// This endpoint holds `thread`'s lease and trusts it for half a lease more: a request
    /// about it needs no ask of the store.
    pub(super) fn holds(&self, thread: &str) -> bool {
        let now = Instant::now();
        lock(&self.held)
            .get(thread)
            .is_some_and(|held| !held.lost && held.trusted_until > now + self.ttl / 2)
    }

    /// One ask for the lease: the refusal, and how long the other holder's lease has left.
    fn try_claim(&self, thread: &str) -> Result<(), (String, Option<Duration>)> {
        if self.holds(thread) {
            return Ok(());
        }
        let asked = Instant::now();
        match self.store.take_lease(thread, &self.holder, self.ttl) {
            Some(LeaseTaken::Held { epoch }) => {
                let before = lock(&self.held).insert(
                    thread.to_string(),
                    Held {
                        epoch,
                        trusted_until: asked + self.ttl * 3 / 4,
                        lost: false,
                    },
                );
                if before.is_none_or(|before| before.epoch != epoch) && epoch > 1 {
                    tracing::info!("thread {thread}: its lease is this endpoint's now (epoch {epoch})");
                }
                Ok(())
            }
            Some(LeaseTaken::Busy {
                holder,
                epoch,
                left_ms,
            }) => Err((
                format!(
                    "clawbridge: thread {thread} is served by another endpoint ({holder}, lease epoch {epoch}, {:.1} s left); reach it through that endpoint, or once its lease ends",
                    left_ms as f64 / 1000.0
                ),
                Some(Duration::from_millis(left_ms)),
            )),
            None => Err((
                format!(
                    "clawbridge: the fleet's store cannot be reached to take thread {thread}'s lease; try again"
                ),
                None,
            )),
        }
    }

    /// Whether a message of `thread` may be relayed now: a lease not trusted any more is
    /// renewed first (blocking on the store: only a paused or slow endpoint gets here).
    pub(super) fn may_relay(&self, thread: &str) -> Relay {
        let now = Instant::now();
        let held = lock(&self.held).get(thread).copied();
        match held {
            None => Relay::Go,
            Some(held) if held.lost => Relay::Lost,
            Some(held) if held.trusted_until > now => Relay::Go,
            Some(_) => {
                let kept = self
                    .store
                    .renew_leases(&self.holder, vec![thread.to_string()], self.ttl)
                    .is_some_and(|kept| kept.iter().any(|kept| kept == thread));
                let mut leases = lock(&self.held);
                match leases.get_mut(thread) {
                    Some(held) if kept => {
                        held.trusted_until = now + self.ttl * 3 / 4;
                        Relay::Go
                    }
                    Some(held) => {
                        held.lost = true;
                        Relay::Lost
                    }
                    None => Relay::Lost,
                }
            }
        }
    }

    /// Renew every lease this endpoint still follows (`follows`), let the others go: the
    /// threads another endpoint took meanwhile (blocking on the store).
    pub(super) fn renew(&self, follows: impl Fn(&str) -> bool) -> Vec<String> {
        let asked = Instant::now();
        let (kept, dropped): (Vec<String>, Vec<String>) = lock(&self.held)
            .iter()
            .filter(|(_, held)| !held.lost)
            .map(|(thread, _)| thread.clone())
            .partition(|thread| follows(thread));
        if !dropped.is_empty() {
            self.store.release_leases(&self.holder, dropped.clone());
            let mut held = lock(&self.held);
            for thread in &dropped {
                held.remove(thread);
            }
        }
        if kept.is_empty() {
            return Vec::new();
        }
        let Some(renewed) = self
            .store
            .renew_leases(&self.holder, kept.clone(), self.ttl)
        else {
            // The store is out of reach: nothing is renewed, and what is held is trusted until
            // its time runs out (then the relays stop).
            return Vec::new();
        };
        let mut held = lock(&self.held);
        let mut lost = Vec::new();
        for thread in kept {
            if renewed.contains(&thread) {
                if let Some(lease) = held.get_mut(&thread) {
                    lease.trusted_until = asked + self.ttl * 3 / 4;
                }
            } else {
                if let Some(lease) = held.get_mut(&thread) {
                    lease.lost = true;
                }
                lost.push(thread);
            }
        }
        lost
    }
}
