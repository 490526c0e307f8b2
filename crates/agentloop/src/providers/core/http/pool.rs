//! The connections of one adapter (one origin): idle HTTP/1.1 connections kept for reuse, and
//! HTTP/2 connections shared by concurrent requests, with an idle reaper.
//!
//! HTTP/1.1 carries one request at a time per connection: a request takes the most recently
//! used idle connection that is still open (or opens one) and gives it back when its response
//! is dropped; a connection whose response was not read to its end is closed.
//!
//! HTTP/2 multiplexes; a server allows only so many concurrent streams per connection
//! (`SETTINGS_MAX_CONCURRENT_STREAMS`, often 100–250) and queues the rest. The pool counts the
//! requests in flight on each connection and opens another when every one carries
//! [`ProviderConfig::http2_streams_per_connection`](crate::providers::ProviderConfig) requests,
//! up to [`ProviderConfig::http2_max_connections`](crate::providers::ProviderConfig); past that,
//! requests share the least busy one. Requests that arrive while a connection is being set up
//! wait for it rather than each opening their own.
//!
//! With [`HttpVersion::Auto`](crate::providers::HttpVersion) over TLS the first connection
//! tells which version the server speaks (ALPN); a server that declines HTTP/2 turns the pool
//! into an HTTP/1.1 one.
//!
//! Idle connections (HTTP/1.1 ones waiting in the pool, HTTP/2 ones without a stream) are
//! closed after [`ProviderConfig::pool_idle_timeout`](crate::providers::ProviderConfig) by one
//! reaper task per pool, which runs only while the pool holds connections and sleeps until the
//! next one expires; a request also skips the expired ones it finds. No task per request.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::HttpError;
use super::connect::{Connection, Connector};
use super::{h1, h2};

/// One adapter's connections (see the module docs).
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("Pool")
            .field("connector", &self.shared.connector)
            .field("idle_http1", &state.idle.len())
            .field("http2", &state.h2.len())
            .finish()
    }
}

struct Shared {
    connector: Connector,
    state: Mutex<State>,
    /// Whether the pool may speak HTTP/2 (and so shares connections).
    h2: bool,
    per_connection: usize,
    max_h2: usize,
    idle_timeout: Duration,
    /// The origin of the idle timestamps kept in atomics (nanoseconds since this instant).
    epoch: Instant,
}

#[derive(Default)]
struct State {
    /// Idle HTTP/1.1 connections, the most recently used last.
    idle: Vec<IdleHttp1>,
    /// HTTP/2 connections (or connections being set up).
    h2: Vec<Arc<Http2Slot>>,
    /// The server declined HTTP/2 during ALPN: HTTP/1.1 from now on.
    http1_learned: bool,
    /// Whether the reaper task is running.
    reaping: bool,
}

struct IdleHttp1 {
    connection: h1::Connection,
    since: Instant,
}

/// One HTTP/2 connection: set up once by the first request that needs it.
struct Http2Slot {
    connection: OnceCell<h2::Connection>,
    in_flight: AtomicUsize,
    /// When the last stream ended (nanoseconds since the pool's epoch).
    idle_since: AtomicU64,
}

impl Http2Slot {
    fn is_closed(&self) -> bool {
        self.connection.get().is_some_and(h2::Connection::is_closed)
    }
}

/// A connection lent to one request: given back (HTTP/1.1) or its stream count lowered
/// (HTTP/2) when dropped.
pub(crate) struct Lease {
    pub(crate) connection: Leased,
    /// Whether the connection was taken from the pool (a request on it that fails before it was
    /// sent may be sent again on a new one).
    pub(crate) reused: bool,
    shared: Weak<Shared>,
    slot: Option<Arc<Http2Slot>>,
}

/// The connection of a [`Lease`].
pub(crate) enum Leased {
    /// An HTTP/1.1 connection, the lease's alone.
    Http1(Option<h1::Connection>),
    /// A handle on a shared HTTP/2 connection.
    Http2(h2::Connection),
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        match (&mut self.connection, &self.slot) {
            (Leased::Http1(connection), _) => {
                if let Some(connection) = connection.take().filter(h1::Connection::is_reusable) {
                    shared.lock().idle.push(IdleHttp1 {
                        connection,
                        since: Instant::now(),
                    });
                    shared.ensure_reaper();
                }
            }
            (Leased::Http2(_), Some(slot)) => {
                if slot.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
                    slot.idle_since.store(shared.now(), Ordering::Release);
                    shared.ensure_reaper();
                }
            }
            (Leased::Http2(_), None) => {}
        }
    }
}

impl Pool {
    /// A pool opening connections with `connector`; `h2` when the configuration may speak
    /// HTTP/2.
    pub(crate) fn new(
        connector: Connector,
        h2: bool,
        config: &crate::providers::ProviderConfig,
    ) -> Self {
        Pool {
            shared: Arc::new(Shared {
                connector,
                state: Mutex::new(State::default()),
                h2,
                per_connection: config.http2_streams_per_connection.max(1),
                max_h2: config.http2_max_connections.max(1),
                idle_timeout: config.pool_idle_timeout,
                epoch: Instant::now(),
            }),
        }
    }

    /// The connector (for what requests need to know about proxies).
    pub(crate) fn connector(&self) -> &Connector {
        &self.shared.connector
    }

    /// A connection for one request.
    pub(crate) async fn lease(&self) -> Result<Lease, HttpError> {
        let shared = &self.shared;
        if shared.h2 && !shared.lock().http1_learned {
            // `None`: the server speaks HTTP/1.1 only.
            if let Some(lease) = self.lease_http2().await? {
                return Ok(lease);
            }
        }
        self.lease_http1().await
    }

    /// The most recently used idle HTTP/1.1 connection that is still open, else a new one.
    async fn lease_http1(&self) -> Result<Lease, HttpError> {
        let idle = {
            let mut state = self.shared.lock();
            let now = Instant::now();
            let timeout = self.shared.idle_timeout;
            let mut found = None;
            while let Some(mut candidate) = state.idle.pop() {
                // Expired or closed by the server meanwhile: dropped (closed) here.
                if now - candidate.since < timeout && candidate.connection.is_open() {
                    found = Some(candidate.connection);
                    break;
                }
            }
            found
        };
        if let Some(connection) = idle {
            return Ok(self.http1_lease(connection, true));
        }
        // Boxed, as below: setting up a connection (TLS included) is rare and large, and held
        // in place it would size every request's future for as long as it waits for its head.
        match Box::pin(self.shared.connector.connect()).await? {
            Connection::Http1(connection) => Ok(self.http1_lease(connection, false)),
            // Only prior knowledge gets HTTP/2 without ALPN, and that pool leases HTTP/2.
            Connection::Http2(_) => Err(HttpError::connect(
                "the server negotiated HTTP/2 on a connection meant for HTTP/1.1",
            )),
        }
    }

    fn http1_lease(&self, connection: h1::Connection, reused: bool) -> Lease {
        Lease {
            connection: Leased::Http1(Some(connection)),
            reused,
            shared: Arc::downgrade(&self.shared),
            slot: None,
        }
    }

    /// A stream on the least busy HTTP/2 connection, or on a new one when every connection
    /// carries its share. `None` when the server turned out to speak HTTP/1.1 only.
    async fn lease_http2(&self) -> Result<Option<Lease>, HttpError> {
        let slot = self.pick_http2_slot();
        let reused = slot.connection.initialized();
        let connector = &self.shared.connector;
        let result = slot
            .connection
            .get_or_try_init(|| async {
                match Box::pin(connector.connect()).await? {
                    Connection::Http2(sender) => Ok(sender),
                    Connection::Http1(connection) => Err(Http2Setup::Declined(connection)),
                }
            })
            .await
            .cloned();
        let lease = Lease {
            connection: Leased::Http2(match result {
                Ok(sender) => sender,
                Err(failure) => {
                    // The stream count taken for this request is given back with the slot.
                    slot.in_flight.fetch_sub(1, Ordering::AcqRel);
                    self.forget(&slot);
                    return match failure {
                        Http2Setup::Failed(e) => Err(e),
                        Http2Setup::Declined(connection) => {
                            self.shared.lock().http1_learned = true;
                            Ok(Some(self.http1_lease(connection, false)))
                        }
                    };
                }
            }),
            reused,
            shared: Arc::downgrade(&self.shared),
            slot: Some(slot),
        };
        Ok(Some(lease))
    }

    /// The HTTP/2 slot for one more request (its stream counted): the least busy open one, or
    /// a new one when none has room and the pool may grow.
    fn pick_http2_slot(&self) -> Arc<Http2Slot> {
        let mut state = self.shared.lock();
        state.h2.retain(|s| !s.is_closed());
        let least_busy = state
            .h2
            .iter()
            .min_by_key(|s| s.in_flight.load(Ordering::Acquire))
            .cloned();
        let slot = match least_busy {
            Some(slot)
                if slot.in_flight.load(Ordering::Acquire) < self.shared.per_connection
                    || state.h2.len() >= self.shared.max_h2 =>
            {
                slot
            }
            _ => {
                let slot = Arc::new(Http2Slot {
                    connection: OnceCell::new(),
                    in_flight: AtomicUsize::new(0),
                    idle_since: AtomicU64::new(self.shared.now()),
                });
                state.h2.push(Arc::clone(&slot));
                slot
            }
        };
        slot.in_flight.fetch_add(1, Ordering::AcqRel);
        slot
    }

    /// Takes a slot whose connection could not be set up out of the pool (if no other request
    /// is still using it).
    fn forget(&self, slot: &Arc<Http2Slot>) {
        if slot.connection.initialized() {
            return;
        }
        let mut state = self.shared.lock();
        if slot.in_flight.load(Ordering::Acquire) == 0 {
            state.h2.retain(|s| !Arc::ptr_eq(s, slot));
        }
    }
}

/// Why an HTTP/2 connection was not set up.
enum Http2Setup {
    Failed(HttpError),
    /// ALPN chose HTTP/1.1: the connection is good, for one request at a time.
    Declined(h1::Connection),
}

impl From<HttpError> for Http2Setup {
    fn from(error: HttpError) -> Self {
        Http2Setup::Failed(error)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Starts the reaper unless it runs (or there is no runtime to run it on: expired
    /// connections are then skipped by the next request).
    fn ensure_reaper(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            let mut state = self.lock();
            if state.reaping {
                return;
            }
            state.reaping = true;
        }
        runtime.spawn(reap(Arc::downgrade(self)));
    }

    /// Drops the connections idle for the idle timeout; the next expiry, if any connection is
    /// left. Clears `reaping` when the pool is empty, under the same lock.
    fn reap_once(&self) -> Option<Instant> {
        let mut state = self.lock();
        let now = Instant::now();
        let timeout = self.idle_timeout;
        state
            .idle
            .retain_mut(|c| now - c.since < timeout && c.connection.is_open());
        let now_nanos = self.now();
        let timeout_nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let mut next: Option<Instant> = state.idle.iter().map(|c| c.since + timeout).min();
        state.h2.retain(|slot| {
            if slot.is_closed() {
                return false;
            }
            if slot.in_flight.load(Ordering::Acquire) > 0 {
                // Busy: checked again one idle timeout from now at the latest.
                next = Some(next.map_or(now + timeout, |n| n.min(now + timeout)));
                return true;
            }
            let idle = now_nanos.saturating_sub(slot.idle_since.load(Ordering::Acquire));
            if idle >= timeout_nanos {
                return false;
            }
            let expires = now + Duration::from_nanos(timeout_nanos - idle);
            next = Some(next.map_or(expires, |n| n.min(expires)));
            true
        });
        if next.is_none() {
            state.reaping = false;
        }
        next
    }
}

/// The reaper of one pool: sleeps until the next idle connection expires, drops the expired
/// ones, and ends when the pool is empty or dropped.
async fn reap(shared: Weak<Shared>) {
    loop {
        let next = match shared.upgrade() {
            Some(shared) => shared.reap_once(),
            None => return,
        };
        match next {
            Some(at) => tokio::time::sleep_until(at).await,
            None => return,
        }
    }
}
