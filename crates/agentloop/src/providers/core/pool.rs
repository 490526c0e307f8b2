//! A small pool of HTTP clients, one HTTP/2 connection each, for adapters that speak HTTP/2.
//!
//! Over HTTP/2 one client keeps one connection per host and multiplexes every request on it; a
//! server allows only so many concurrent streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`,
//! often 100–250), and the client queues the rest until a stream frees up. Thousands of
//! concurrent sessions against one provider would wait in line. The pool counts the requests in
//! flight on each client and opens another client (so another connection) when every one of
//! them carries [`ProviderConfig::http2_streams_per_connection`](crate::providers::ProviderConfig) requests,
//! up to [`ProviderConfig::http2_max_connections`](crate::providers::ProviderConfig); past that, requests
//! share the least busy connection (and queue there, as before).
//!
//! HTTP/1.1 needs none of this (its client opens a connection per concurrent request), so an
//! HTTP/1.1 adapter has a pool of one client and no counting.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One client of the pool and the number of requests in flight on it.
struct Slot {
    client: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

/// Builds one client of a pool.
type Build = Box<dyn Fn() -> Result<reqwest::Client, reqwest::Error> + Send + Sync>;

/// The clients of one adapter (see the module docs). No client exists until the first request:
/// building one loads the TLS root certificates (every one in the system store), which a program
/// that may never send a request — a chat waiting at its prompt, `--help` — should not pay for.
pub(crate) struct ClientPool {
    slots: Mutex<Vec<Slot>>,
    /// Builds the first client, and the further ones of a growing pool.
    build: Build,
    /// Whether the pool opens more clients than one (HTTP/2).
    grows: bool,
    per_connection: usize,
    max_clients: usize,
}

impl std::fmt::Debug for ClientPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientPool")
            .field("clients", &self.len())
            .field("per_connection", &self.per_connection)
            .field("max_clients", &self.max_clients)
            .finish()
    }
}

/// A client lent for one request; the request counts as in flight until the lease is dropped.
pub(crate) struct Lease {
    pub(crate) client: reqwest::Client,
    in_flight: Option<Arc<AtomicUsize>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(count) = &self.in_flight {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl ClientPool {
    /// A pool of exactly one client, built by `build` on the first lease, never grown, without
    /// counting (HTTP/1.1).
    pub(crate) fn single(
        build: impl Fn() -> Result<reqwest::Client, reqwest::Error> + Send + Sync + 'static,
    ) -> Self {
        ClientPool {
            slots: Mutex::new(Vec::new()),
            build: Box::new(build),
            grows: false,
            per_connection: usize::MAX,
            max_clients: 1,
        }
    }

    /// A pool whose clients `build` makes on demand, up to `max_clients`, each given
    /// `per_connection` requests before another is opened.
    pub(crate) fn growing(
        build: impl Fn() -> Result<reqwest::Client, reqwest::Error> + Send + Sync + 'static,
        per_connection: usize,
        max_clients: usize,
    ) -> Self {
        ClientPool {
            slots: Mutex::new(Vec::new()),
            build: Box::new(build),
            grows: true,
            per_connection: per_connection.max(1),
            max_clients: max_clients.max(1),
        }
    }

    /// How many clients (connections, over HTTP/2) the pool has opened.
    pub(crate) fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// A client for one request: the least busy one, or a new one when there is none yet or
    /// every client is at its share of streams and the pool may still grow. The error is the
    /// first client's, which could not be built (the next lease tries again).
    pub(crate) fn lease(&self) -> Result<Lease, reqwest::Error> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.is_empty() {
            slots.push(Slot {
                client: (self.build)()?,
                in_flight: Arc::new(AtomicUsize::new(0)),
            });
        }
        if !self.grows {
            // A pool of one: no counting on the HTTP/1.1 hot path.
            return Ok(Lease {
                client: slots[0].client.clone(),
                in_flight: None,
            });
        }
        let busiest_free = slots
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.in_flight.load(Ordering::Relaxed))
            .map(|(i, s)| (i, s.in_flight.load(Ordering::Relaxed)));
        let mut index = busiest_free.map_or(0, |(i, _)| i);
        let full = busiest_free.is_none_or(|(_, n)| n >= self.per_connection);
        if full && slots.len() < self.max_clients {
            // A client that cannot be built (one was built already) leaves the pool as is.
            if let Ok(client) = (self.build)() {
                slots.push(Slot {
                    client,
                    in_flight: Arc::new(AtomicUsize::new(0)),
                });
                index = slots.len() - 1;
            }
        }
        let slot = &slots[index];
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            client: slot.client.clone(),
            in_flight: Some(Arc::clone(&slot.in_flight)),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn grows_when_every_client_is_full_and_shrinks_its_counts_on_drop() {
        let pool = ClientPool::growing(|| Ok(reqwest::Client::new()), 2, 3);
        assert_eq!(pool.len(), 0, "no client before the first request");
        let leases: Vec<Lease> = (0..6).map(|_| pool.lease().unwrap()).collect();
        assert_eq!(pool.len(), 3);
        // At the cap: the seventh shares the least busy client.
        let seventh = pool.lease().unwrap();
        assert_eq!(pool.len(), 3);
        drop(leases);
        drop(seventh);
        // Everything returned: the next lease reuses a client.
        let _again = pool.lease().unwrap();
        assert_eq!(pool.len(), 3);
    }

    #[test]
    fn a_single_pool_never_grows() {
        let pool = ClientPool::single(|| Ok(reqwest::Client::new()));
        assert_eq!(pool.len(), 0, "no client before the first request");
        let _leases: Vec<Lease> = (0..500).map(|_| pool.lease().unwrap()).collect();
        assert_eq!(pool.len(), 1);
    }
}
