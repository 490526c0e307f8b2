//! The provider transport's HTTP client: one [`Client`] per adapter,
//! for the one origin the adapter posts to, with a pool of its own ([`pool`]), TLS with the
//! platform's roots ([`tls`]), proxies from the environment ([`proxy`]) and the redirect policy
//! of the provider core: redirects are followed within the configured origin only (scheme, host
//! and port), at most [`MAX_REDIRECTS`](crate::providers::config::MAX_REDIRECTS) of them, so
//! that the headers that carry credentials never reach another host; a redirect elsewhere is
//! handed back as is, for the transport to report.
//!
//! HTTP/1.1 is spoken by a codec of this module's own ([`h1`], which says why), HTTP/2 by the
//! `h2` crate driven directly ([`h2`], which says why; negotiated by ALPN over TLS, or with
//! prior knowledge).
//!
//! What a request needs is prepared once per adapter (by the transport's endpoint): the parsed
//! URI, the `Host` header and the headers every request carries. Each request clones them
//! (reference-counted bytes), takes its body without copying it, and hands the response body's
//! bytes to the SSE decoder as they were read.

mod connect;
mod h1;
mod h2;
mod pool;
pub mod proxy;
mod tls;

use hyper::body::Bytes;
use hyper::http::uri::{Authority, PathAndQuery, Scheme};
use hyper::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};

use self::connect::Connector;
use self::pool::{Lease, Leased, Pool};

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[error("{message}")]
pub(crate) struct HttpError {
    kind: ErrorKind,
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorKind {
    /// The client cannot work with this configuration (TLS roots, proxy, host).
    Config,
    /// No connection could be opened.
    Connect,
    /// The request or its response failed on an open connection.
    Request,
    /// More redirects than allowed.
    Redirects,
}

impl HttpError {
    fn config(message: impl Into<String>) -> Self {
        HttpError {
            kind: ErrorKind::Config,
            message: message.into(),
            source: None,
        }
    }

    fn connect(message: impl Into<String>) -> Self {
        HttpError {
            kind: ErrorKind::Connect,
            message: message.into(),
            source: None,
        }
    }

    fn connect_io(message: &str, error: std::io::Error) -> Self {
        HttpError {
            kind: ErrorKind::Connect,
            message: message.to_owned(),
            source: Some(Box::new(error)),
        }
    }

    fn connect_h2(message: &str, error: ::h2::Error) -> Self {
        HttpError {
            kind: ErrorKind::Connect,
            message: message.to_owned(),
            source: Some(Box::new(error)),
        }
    }

    fn request_h2(message: &str, error: ::h2::Error) -> Self {
        HttpError {
            kind: ErrorKind::Request,
            message: message.to_owned(),
            source: Some(Box::new(error)),
        }
    }

    fn request_io(message: &str, error: std::io::Error) -> Self {
        HttpError {
            kind: ErrorKind::Request,
            message: message.to_owned(),
            source: Some(Box::new(error)),
        }
    }

    /// The server broke the protocol (a malformed or oversized head, a bad chunk, a body cut
    /// short).
    fn protocol(message: String) -> Self {
        HttpError {
            kind: ErrorKind::Request,
            message,
            source: None,
        }
    }

    /// Whether the configuration, not the server, is at fault (sending again cannot help).
    pub(crate) fn is_config(&self) -> bool {
        self.kind == ErrorKind::Config
    }

    /// Whether the request was redirected more often than allowed (a loop).
    pub(crate) fn is_redirect_loop(&self) -> bool {
        self.kind == ErrorKind::Redirects
    }
}

/// A response head and its body, as a connection of either protocol returns it (`B`: how
/// that protocol reads the body).
pub(crate) struct Head<B> {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: B,
}

/// Why a request got no response head.
pub(crate) struct SendError {
    pub(crate) error: HttpError,
    /// Nothing came back and the request may go on a new connection: over HTTP/1.1 the
    /// connection was found closed (or reset) while the request was written or before the
    /// first byte of an answer (on a pooled connection, the server closed it while idle); over
    /// HTTP/2 the connection could open no stream for it (closed, or going away), or the
    /// server refused the stream.
    pub(crate) unanswered: bool,
    /// The server said it processed nothing of the request (an HTTP/2 stream refused): it may
    /// be sent again even on the connection just opened for it.
    pub(crate) refused: bool,
}

impl SendError {
    /// A failure the server did not refuse: `unanswered` as documented on the field.
    pub(crate) fn new(error: HttpError, unanswered: bool) -> Self {
        SendError {
            error,
            unanswered,
            refused: false,
        }
    }
}

/// How many times one request is sent again after the server refused it unprocessed.
const MAX_REFUSALS: u32 = 3;

/// Whether a request that got no response head is sent again on a new lease (counting
/// refusals in `refusals`): one a reused connection left unanswered (the server closed it
/// while idle), or one the server refused without processing it, up to [`MAX_REFUSALS`] times.
fn send_again(failure: &SendError, reused: bool, refusals: &mut u32) -> bool {
    if !failure.unanswered {
        return false;
    }
    if failure.refused {
        // Whatever the connection: a server that refuses every stream ends the loop.
        *refusals += 1;
        return *refusals <= MAX_REFUSALS;
    }
    reused
}

/// A response: status, headers, the body, and the URL that answered (after redirects). Holds
/// its connection until dropped.
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    body: ResponseBody,
    /// The URL of the request that got this response.
    pub(crate) url: Uri,
    lease: Lease,
}

/// A response body: read from its HTTP/1.1 connection by the response itself, or the data of
/// its HTTP/2 stream.
enum ResponseBody {
    Http1(h1::Body),
    Http2(h2::Body),
}

impl Response {
    /// The next piece of the body; `None` at its end. Trailers are skipped.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        match &mut self.body {
            ResponseBody::Http1(body) => match &mut self.lease.connection {
                Leased::Http1(Some(connection)) => connection.chunk(body).await,
                _ => Ok(None),
            },
            ResponseBody::Http2(body) => body.chunk().await,
        }
    }

    /// The whole body as text (lossy), for error bodies.
    pub(crate) async fn text(mut self) -> Result<String, HttpError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            bytes.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The HTTP client of one adapter.
#[derive(Debug)]
pub(crate) struct Client {
    pool: Pool,
    /// The origin every request goes to: `(scheme, authority)`.
    origin: (Scheme, Authority),
    /// The `Host` header of HTTP/1.1 requests: the authority (a URL that went through
    /// `url::Url` carries no default port).
    host: HeaderValue,
}

impl Client {
    /// A client for the origin of `uri` (absolute, without credentials), with the
    /// configuration's connection settings. No connection is opened (and no TLS root loaded,
    /// no proxy variable read) before the first request.
    pub(crate) fn new(
        uri: &Uri,
        config: &crate::providers::ProviderConfig,
    ) -> Result<Self, String> {
        let https = uri.scheme_str() == Some("https");
        let host = uri.host().unwrap_or_default();
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let connector = Connector::new(host, port, https, config)?;
        let origin = (
            uri.scheme().cloned().unwrap_or(Scheme::HTTP),
            uri.authority()
                .cloned()
                .ok_or_else(|| "the provider URL has no host".to_owned())?,
        );
        let host = HeaderValue::from_str(origin.1.as_str())
            .map_err(|_| "the provider URL's host is not a valid header value".to_owned())?;
        Ok(Client {
            pool: Pool::new(connector, config.may_use_http2(), config),
            origin,
            host,
        })
    }

    /// POSTs `body` to `uri` with `headers`, following redirects within the origin. A
    /// redirect to another origin is returned as the response (3xx).
    pub(crate) async fn post(
        &self,
        uri: &Uri,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Response, HttpError> {
        let response = self.send(&Method::POST, uri.clone(), headers, body).await?;
        match self.redirect_target(&response) {
            None => Ok(response),
            // Boxed: rare, and it would size every request's future otherwise.
            Some(next) => {
                Box::pin(self.follow(response, next, headers.clone(), body.clone())).await
            }
        }
    }

    /// Follows the redirect `response` made to `next` (and any further ones) within the
    /// origin.
    async fn follow(
        &self,
        response: Response,
        mut next: Uri,
        mut headers: HeaderMap,
        mut body: Bytes,
    ) -> Result<Response, HttpError> {
        let mut method = Method::POST;
        let mut redirects = 0;
        let mut status = response.status;
        // Given back before the next request, so that it can go on the same connection.
        drop(response);
        loop {
            if redirects >= crate::providers::config::MAX_REDIRECTS {
                return Err(HttpError {
                    kind: ErrorKind::Redirects,
                    message: "too many redirects".to_owned(),
                    source: None,
                });
            }
            redirects += 1;
            // 301/302 after a POST and every 303 become a GET without a body, as browsers and
            // reqwest do; 307/308 repeat the request as it was.
            if matches!(
                status,
                StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER
            ) && method != Method::HEAD
            {
                method = Method::GET;
                body = Bytes::new();
                for name in [
                    header::CONTENT_TYPE,
                    header::CONTENT_LENGTH,
                    header::CONTENT_ENCODING,
                    header::TRANSFER_ENCODING,
                ] {
                    headers.remove(name);
                }
            }
            let response = self.send(&method, next, &headers, &body).await?;
            match self.redirect_target(&response) {
                None => return Ok(response),
                Some(target) => {
                    next = target;
                    status = response.status;
                }
            }
        }
    }

    /// Where `response` redirects to, when it is a redirect this client follows (same origin,
    /// a `Location` that parses).
    fn redirect_target(&self, response: &Response) -> Option<Uri> {
        if !matches!(
            response.status,
            StatusCode::MOVED_PERMANENTLY
                | StatusCode::FOUND
                | StatusCode::SEE_OTHER
                | StatusCode::TEMPORARY_REDIRECT
                | StatusCode::PERMANENT_REDIRECT
        ) {
            return None;
        }
        let location = response.headers.get(header::LOCATION)?.to_str().ok()?;
        let base = url::Url::parse(&response.url.to_string()).ok()?;
        let next = base.join(location).ok()?;
        let next: Uri = next.as_str().parse().ok()?;
        let same = next.scheme() == Some(&self.origin.0)
            && next.host() == Some(self.origin.1.host())
            && port_or_default(&next) == port_or_default(&response.url);
        // Credentials in the location make it another origin for this purpose: the userinfo
        // would have to be sent somewhere.
        let userinfo = next.authority().is_some_and(|a| a.as_str().contains('@'));
        (same && !userinfo).then_some(next)
    }

    /// One request on a pooled connection; a reused connection the server closed meanwhile
    /// (the request got no answer at all) is replaced by another one.
    async fn send(
        &self,
        method: &Method,
        uri: Uri,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Response, HttpError> {
        let mut lease = self.pool.lease().await?;
        let mut refusals = 0;
        loop {
            let reused = lease.reused;
            // `Err(None)`: to be sent again on a new lease.
            let answer = match &mut lease.connection {
                Leased::Http1(Some(connection)) => {
                    let head = self.http1_head(method, &uri, headers, body.len());
                    match connection.send(method, &head, body).await {
                        Ok(head) => Ok((head.status, head.headers, ResponseBody::Http1(head.body))),
                        Err(failure) if send_again(&failure, reused, &mut refusals) => Err(None),
                        Err(failure) => Err(Some(failure.error)),
                    }
                }
                Leased::Http2(connection) => {
                    match connection.send(method, &uri, headers, body).await {
                        Ok(head) => Ok((head.status, head.headers, ResponseBody::Http2(head.body))),
                        Err(failure) if send_again(&failure, reused, &mut refusals) => Err(None),
                        Err(failure) => Err(Some(failure.error)),
                    }
                }
                Leased::Http1(None) => Err(Some(HttpError::connect(
                    "the connection was already given back",
                ))),
            };
            match answer {
                Ok((status, headers, body)) => {
                    return Ok(Response {
                        status,
                        headers,
                        body,
                        url: uri,
                        lease,
                    });
                }
                Err(Some(error)) => return Err(error),
                Err(None) => {
                    drop(lease);
                    lease = self.pool.lease().await?;
                }
            }
        }
    }

    /// The head of an HTTP/1.1 request: the path on the request line and a `Host` header, or
    /// the whole URL and the proxy's credentials when a proxy forwards it.
    fn http1_head(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body_len: usize,
    ) -> Vec<u8> {
        match self.pool.connector().forwarding() {
            Some(route) => {
                let name = header::PROXY_AUTHORIZATION;
                let auth = route.authorization.as_ref().map(|value| (&name, value));
                let target = uri.to_string();
                h1::encode_head(method, &target, &self.host, headers, auth, body_len)
            }
            None => {
                let target = uri.path_and_query().map_or("/", PathAndQuery::as_str);
                h1::encode_head(method, target, &self.host, headers, None, body_len)
            }
        }
    }
}

fn port_or_default(uri: &Uri) -> Option<u16> {
    uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })
}
