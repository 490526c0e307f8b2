//! The provider transport's HTTP client, on hyper's connection API: one [`Client`] per adapter,
//! for the one origin the adapter posts to, with a pool of its own ([`pool`]), TLS with the
//! platform's roots ([`tls`]), proxies from the environment ([`proxy`]) and the redirect policy
//! of the provider core: redirects are followed within the configured origin only (scheme, host
//! and port), at most [`MAX_REDIRECTS`](crate::providers::config::MAX_REDIRECTS) of them, so
//! that the headers that carry credentials never reach another host; a redirect elsewhere is
//! handed back as is, for the transport to report.
//!
//! What a request needs is prepared once per adapter (by the transport's endpoint): the parsed
//! URI, the `Host` header and the headers every request carries. Each request clones them
//! (reference-counted bytes), takes its body without copying it, and hands the response body's
//! frames to the SSE decoder as hyper delivers them.

mod connect;
mod pool;
pub mod proxy;
mod tls;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::http::uri::{Authority, PathAndQuery, Scheme};
use hyper::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};

pub(crate) use self::connect::Body;
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

    fn connect_hyper(message: &str, error: hyper::Error) -> Self {
        HttpError {
            kind: ErrorKind::Connect,
            message: message.to_owned(),
            source: Some(Box::new(error)),
        }
    }

    fn request(message: &str, error: hyper::Error) -> Self {
        HttpError {
            kind: ErrorKind::Request,
            message: message.to_owned(),
            source: Some(Box::new(error)),
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

/// A response: status, headers, the body as hyper streams it, and the URL that answered
/// (after redirects). Holds its connection until dropped.
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    body: Incoming,
    /// The URL of the request that got this response.
    pub(crate) url: Uri,
    _lease: Lease,
}

impl Response {
    /// The next piece of the body; `None` at its end. Trailers are skipped.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(HttpError::request("error reading the response body", e));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
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
        let response = self
            .send(Method::POST, uri.clone(), headers.clone(), body.clone())
            .await?;
        match self.redirect_target(&response) {
            None => Ok(response),
            Some(next) => {
                self.follow(response, next, headers.clone(), body.clone())
                    .await
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
            let response = self
                .send(method.clone(), next, headers.clone(), body.clone())
                .await?;
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

    /// One request on a pooled connection; a reused HTTP/1.1 connection the server closed
    /// meanwhile (the request never left) is replaced by a new one once.
    async fn send(
        &self,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, HttpError> {
        let mut lease = self.pool.lease().await?;
        let mut request = self.build(&lease, method, &uri, headers, body);
        loop {
            let reused = lease.reused;
            let result = match &mut lease.connection {
                Leased::Http1(Some(sender)) => sender.try_send_request(request).await,
                Leased::Http2(sender) => sender.try_send_request(request).await,
                Leased::Http1(None) => {
                    return Err(HttpError::connect("the connection was already given back"));
                }
            };
            match result {
                Ok(response) => {
                    let (parts, body) = response.into_parts();
                    return Ok(Response {
                        status: parts.status,
                        headers: parts.headers,
                        body,
                        url: uri,
                        _lease: lease,
                    });
                }
                Err(mut failure) => match failure.take_message() {
                    Some(unsent) if reused => {
                        let (parts, body) = unsent.into_parts();
                        drop(lease);
                        lease = self.pool.lease().await?;
                        // The new connection may differ in version: rebuild the request for it.
                        let body = body_bytes(body);
                        request = self.build(&lease, parts.method, &uri, parts.headers, body);
                    }
                    _ => {
                        return Err(HttpError::request(
                            "error sending the request",
                            failure.into_error(),
                        ));
                    }
                },
            }
        }
    }

    /// The request as the leased connection needs it: over HTTP/1.1 the path on the request
    /// line and a `Host` header (the whole URL and the proxy's credentials when a proxy
    /// forwards it); over HTTP/2 the whole URL (its scheme and authority become
    /// pseudo-headers).
    fn build(
        &self,
        lease: &Lease,
        method: Method,
        uri: &Uri,
        mut headers: HeaderMap,
        body: Bytes,
    ) -> Request<Body> {
        let wire_uri = match &lease.connection {
            Leased::Http2(_) => uri.clone(),
            Leased::Http1(_) => {
                headers
                    .entry(header::HOST)
                    .or_insert_with(|| self.host.clone());
                match self.pool.connector().forwarding() {
                    Some(route) => {
                        if let Some(auth) = &route.authorization {
                            headers.insert(header::PROXY_AUTHORIZATION, auth.clone());
                        }
                        uri.clone()
                    }
                    None => origin_form(uri),
                }
            }
        };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = wire_uri;
        *request.headers_mut() = headers;
        request
    }
}

/// The bytes of a body built by [`Client::build`] (a `Full` that was never polled).
fn body_bytes(body: Body) -> Bytes {
    use futures::FutureExt;
    match body.collect().now_or_never() {
        Some(Ok(collected)) => collected.to_bytes(),
        _ => Bytes::new(),
    }
}

/// `uri`'s path and query alone (the HTTP/1.1 request line of a direct request).
fn origin_form(uri: &Uri) -> Uri {
    let path = uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    Uri::from(path)
}

fn port_or_default(uri: &Uri) -> Option<u16> {
    uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })
}
