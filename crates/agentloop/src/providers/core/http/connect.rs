//! Opening one connection to an adapter's origin: DNS, TCP (`TCP_NODELAY`, TCP keep-alive),
//! the proxy's CONNECT tunnel when one is configured, TLS with ALPN, and the HTTP/1.1 or HTTP/2
//! handshake; all within the connect timeout. An HTTP/2 connection is driven by a task of its
//! own (one per connection, none per request), which ends when the pool drops the connection's
//! last handle; an HTTP/1.1 one ([`h1::Connection`]) has no task: the request using it reads
//! and writes it.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::HttpError;
use super::proxy::{Proxy, ProxyRules, Route};
use super::{h1, h2};
use crate::providers::HttpVersion;

/// A connection ready for requests.
pub(crate) enum Connection {
    /// HTTP/1.1: one request at a time.
    Http1(h1::Connection),
    /// HTTP/2: requests as concurrent streams (the handle is cloned per request).
    Http2(h2::Connection),
}

/// When TCP keep-alive starts probing an idle connection, and how often (reqwest's defaults,
/// with 3 probes), so that a pooled connection a middlebox dropped is noticed.
const TCP_KEEPALIVE: Duration = Duration::from_secs(15);

/// Everything needed to open connections to one origin.
pub(crate) struct Connector {
    /// `scheme://host[:port]`, for proxy matching.
    origin: hyper::http::Uri,
    host: String,
    port: u16,
    https: bool,
    version: HttpVersion,
    connect_timeout: Duration,
    extra_roots: Vec<String>,
    proxy: Proxy,
    /// The proxy route, resolved on the first connection (the environment is read then).
    route: OnceLock<Result<Option<Route>, String>>,
    /// The TLS configuration, built on the first `https://` connection.
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("https", &self.https)
            .field("version", &self.version)
            .finish()
    }
}

impl Connector {
    /// A connector to `host:port` over TLS when `https`, with the configuration's settings.
    pub(crate) fn new(
        host: String,
        port: u16,
        https: bool,
        config: &crate::providers::ProviderConfig,
    ) -> Result<Self, String> {
        let scheme = if https { "https" } else { "http" };
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let origin = format!("{scheme}://{bracketed}:{port}")
            .parse()
            .map_err(|e| format!("the provider's host cannot be used: {e}"))?;
        Ok(Connector {
            origin,
            host,
            port,
            https,
            version: config.http_version,
            connect_timeout: config.connect_timeout,
            extra_roots: config.root_certificates.clone(),
            proxy: config.proxy.clone(),
            route: OnceLock::new(),
            tls: OnceLock::new(),
        })
    }

    /// The proxy this connector's connections go through (read from the environment on the
    /// first call when the configuration says so).
    pub(crate) fn route(&self) -> Result<Option<&Route>, HttpError> {
        let route = self.route.get_or_init(|| match &self.proxy {
            Proxy::Disabled => Ok(None),
            Proxy::FromEnvironment => ProxyRules::from_env().route(&self.origin),
            Proxy::Rules(rules) => rules.route(&self.origin),
        });
        route
            .as_ref()
            .map(Option::as_ref)
            .map_err(|e| HttpError::config(e.clone()))
    }

    /// Whether plain-HTTP requests are forwarded by a proxy (they then carry the whole URL in
    /// their request line, and the proxy's credentials).
    pub(crate) fn forwarding(&self) -> Option<&Route> {
        match self.route() {
            Ok(Some(route)) if !self.tunnels() => Some(route),
            _ => None,
        }
    }

    /// Whether a proxy is reached through a CONNECT tunnel (TLS, or HTTP/2 with prior
    /// knowledge, which a forwarding proxy cannot carry).
    fn tunnels(&self) -> bool {
        self.https || self.version == HttpVersion::Http2PriorKnowledge
    }

    fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, HttpError> {
        let config = self.tls.get_or_init(|| {
            let alpn: &[&[u8]] = match self.version {
                HttpVersion::Auto => &[b"h2", b"http/1.1"],
                HttpVersion::Http1Only => &[b"http/1.1"],
                HttpVersion::Http2PriorKnowledge => &[b"h2"],
            };
            super::tls::client_config(&self.extra_roots, alpn)
        });
        config.clone().map_err(HttpError::config)
    }

    /// Opens one connection, within the connect timeout.
    pub(crate) async fn connect(&self) -> Result<Connection, HttpError> {
        let limit = self.connect_timeout;
        match tokio::time::timeout(limit, self.open()).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::connect(format!(
                "connecting timed out after {:.1}s (connect_timeout)",
                limit.as_secs_f64()
            ))),
        }
    }

    async fn open(&self) -> Result<Connection, HttpError> {
        let route = self.route()?;
        let (host, port) = match route {
            Some(route) => (route.host.as_str(), route.port),
            None => (self.host.as_str(), self.port),
        };
        let mut tcp = tcp_connect(host, port).await?;
        if let Some(route) = route.filter(|_| self.tunnels()) {
            let authority = self
                .origin
                .authority()
                .map(|a| a.as_str())
                .unwrap_or_default();
            super::proxy::tunnel(&mut tcp, authority, route)
                .await
                .map_err(HttpError::connect)?;
        }
        let (io, negotiated_h2) = if self.https {
            let tls = self.tls_config()?;
            let name = ServerName::try_from(self.host.clone()).map_err(|e| {
                HttpError::config(format!("the provider's host is not a TLS server name: {e}"))
            })?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await
                .map_err(|e| HttpError::connect_io("the TLS handshake failed", e))?;
            let negotiated = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            (Io::Tls(Box::new(stream)), negotiated)
        } else {
            (Io::Plain(tcp), false)
        };
        let http2 = negotiated_h2 || self.version == HttpVersion::Http2PriorKnowledge;
        handshake(io, http2).await
    }
}

/// Resolves `host` and connects to its addresses in turn (the first that answers wins).
async fn tcp_connect(host: &str, port: u16) -> Result<TcpStream, HttpError> {
    let addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| HttpError::connect_io("the host name could not be resolved", e))?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(tcp) => {
                // Small requests and SSE events must not wait for Nagle's algorithm.
                let _ = tcp.set_nodelay(true);
                let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
                #[cfg(any(target_os = "linux", target_os = "android", target_os = "macos"))]
                let keepalive = keepalive.with_interval(TCP_KEEPALIVE).with_retries(3);
                let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
                return Ok(tcp);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => HttpError::connect_io("error connecting", e),
        None => HttpError::connect("the host name resolved to no address"),
    })
}

/// The HTTP/2 handshake over an open stream (the connection's task is spawned here), or the
/// stream as an HTTP/1.1 connection (which needs no handshake).
async fn handshake(io: Io, http2: bool) -> Result<Connection, HttpError> {
    if http2 {
        Ok(Connection::Http2(h2::handshake(io).await?))
    } else {
        Ok(Connection::Http1(h1::Connection::new(io)))
    }
}

/// A connection's byte stream: plain TCP or TLS over TCP.
pub(super) enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Io {
    /// Waits until a plain TCP stream has something to read (or was closed), so that a buffer
    /// is allocated only then. A TLS stream returns at once: it may hold decrypted bytes
    /// already.
    pub(super) async fn readable(&self) -> io::Result<()> {
        match self {
            Io::Plain(s) => s.readable().await,
            Io::Tls(_) => Ok(()),
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Vectored: the head and the body (shared bytes) go in one call, uncopied.
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
