//! Proxies: which one, if any, a provider's requests go through ([`Proxy`], [`ProxyRules`]),
//! read from `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (upper- or lower-case) as
//! curl and reqwest read them, and the CONNECT handshake that opens a tunnel through one.
//!
//! The rules are matched once per adapter (an adapter talks to one origin), not per request.
//! Matching is hyper-util's (`NO_PROXY` entries are domains with their subdomains, IP addresses
//! or networks, or `*`). An `https://` origin (and an `http://` one spoken as HTTP/2 with prior
//! knowledge) goes through a CONNECT tunnel; a plain `http://` one is forwarded (the request
//! line carries the whole URL), as reqwest does.

use hyper::http::{HeaderValue, Uri};
use hyper_util::client::proxy::matcher::Matcher;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Which proxy a provider's requests go through (see [`ProviderConfig::proxy`](crate::providers::ProviderConfig::proxy)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Proxy {
    /// The proxy the environment names ([`ProxyRules::from_env`]), read when the adapter opens
    /// its first connection. The default, as with curl.
    #[default]
    FromEnvironment,
    /// No proxy, whatever the environment says.
    Disabled,
    /// These rules, whatever the environment says.
    Rules(ProxyRules),
}

/// Proxy URLs and exceptions, as the `*_PROXY` variables give them. An empty or unparsable URL
/// is no proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyRules {
    /// The proxy for `http://` origins (`HTTP_PROXY`).
    pub http: Option<String>,
    /// The proxy for `https://` origins (`HTTPS_PROXY`).
    pub https: Option<String>,
    /// The proxy for origins of either scheme without their own (`ALL_PROXY`).
    pub all: Option<String>,
    /// Hosts reached directly, comma-separated (`NO_PROXY`): domains (with their subdomains),
    /// IP addresses, networks (`10.0.0.0/8`) or `*` for every host.
    pub no_proxy: Option<String>,
}

impl ProxyRules {
    /// The rules the process environment gives (see [`ProxyRules::from_lookup`]).
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The rules the variables `lookup` returns give: each of `HTTP_PROXY`, `HTTPS_PROXY`,
    /// `ALL_PROXY` and `NO_PROXY` in upper case, else in lower case (an empty value counts as
    /// unset). Under CGI (`REQUEST_METHOD` set) no proxy is read: there `HTTP_PROXY` can come
    /// from a request's `Proxy:` header.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        if lookup("REQUEST_METHOD").is_some() {
            return ProxyRules::default();
        }
        let first = |upper: &str, lower: &str| {
            [upper, lower]
                .into_iter()
                .find_map(|name| lookup(name).filter(|v| !v.trim().is_empty()))
        };
        ProxyRules {
            http: first("HTTP_PROXY", "http_proxy"),
            https: first("HTTPS_PROXY", "https_proxy"),
            all: first("ALL_PROXY", "all_proxy"),
            no_proxy: first("NO_PROXY", "no_proxy"),
        }
    }

    /// The proxy for `origin` (`scheme://host[:port]`), if these rules send it through one.
    pub(crate) fn route(&self, origin: &Uri) -> Result<Option<Route>, String> {
        let text = |v: &Option<String>| v.clone().unwrap_or_default();
        let matcher = Matcher::builder()
            .http(text(&self.http))
            .https(text(&self.https))
            .all(text(&self.all))
            .no(text(&self.no_proxy))
            .build();
        let Some(intercept) = matcher.intercept(origin) else {
            return Ok(None);
        };
        let uri = intercept.uri();
        let shown = crate::providers::redact_url(&uri.to_string()).into_owned();
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "the proxy {shown} is not supported: only http:// proxies are (an https:// or \
                 SOCKS proxy is not)"
            ));
        }
        let host = uri.host().unwrap_or_default();
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Some(Route {
            host,
            port: uri.port_u16().unwrap_or(80),
            authorization: intercept.basic_auth().cloned(),
            shown,
        }))
    }
}

/// A proxy in use: where to connect, and its credentials.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    /// The proxy's host name or address (without brackets).
    pub(crate) host: String,
    /// The proxy's port.
    pub(crate) port: u16,
    /// `Proxy-Authorization` (basic, from `user:password@` in the proxy URL).
    pub(crate) authorization: Option<HeaderValue>,
    /// The proxy's URL for messages, credentials redacted.
    pub(crate) shown: String,
}

/// Longest CONNECT response head read (a proxy's answer is a status line and a few headers).
const MAX_CONNECT_RESPONSE: usize = 8 * 1024;

/// Asks the proxy at the other end of `tcp` for a tunnel to `authority` (`host:port`) and reads
/// its answer: the stream is the tunnel once a 2xx came back.
pub(crate) async fn tunnel(
    tcp: &mut TcpStream,
    authority: &str,
    route: &Route,
) -> Result<(), String> {
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = route.authorization.as_ref().and_then(|v| v.to_str().ok()) {
        head.push_str("Proxy-Authorization: ");
        head.push_str(auth);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let shown = &route.shown;
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("the proxy {shown} could not be asked for a tunnel: {e}"))?;
    let mut response = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    // Byte-exact: whatever follows the head belongs to the tunnel (TLS), so the head is read
    // up to its blank line and no further.
    while !response.ends_with(b"\r\n\r\n") {
        if response.len() >= MAX_CONNECT_RESPONSE {
            return Err(format!(
                "the proxy {shown} sent an oversized CONNECT response"
            ));
        }
        let n = tcp
            .read(&mut buf[..1])
            .await
            .map_err(|e| format!("the proxy {shown} broke the tunnel's set-up: {e}"))?;
        if n == 0 {
            return Err(format!(
                "the proxy {shown} closed the connection instead of opening a tunnel"
            ));
        }
        response.extend_from_slice(&buf[..n]);
    }
    let status_line = response
        .split(|&b| b == b'\r')
        .next()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let status = status_line.split_whitespace().nth(1).unwrap_or_default();
    if status.len() == 3 && status.starts_with('2') {
        Ok(())
    } else {
        Err(format!(
            "the proxy {shown} refused a tunnel to {authority}: {:.200}",
            status_line.trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::HashMap;

    fn rules(vars: &[(&str, &str)]) -> ProxyRules {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ProxyRules::from_lookup(|name| vars.get(name).cloned())
    }

    /// Checks where each origin's requests go under `rules`: through the proxy at
    /// `host:port`, or direct (`None`).
    fn assert_routes(rules: &ProxyRules, expected: &[(&str, Option<&str>)]) {
        for (origin, hop) in expected {
            let route = rules.route(&origin.parse().unwrap()).unwrap();
            let got = route.map(|r| format!("{}:{}", r.host, r.port));
            assert_eq!(got.as_deref(), *hop, "{origin}");
        }
    }

    #[test]
    fn the_environment_is_read_in_upper_then_lower_case() {
        let r = rules(&[
            ("https_proxy", "http://lower:3128"),
            ("HTTP_PROXY", "http://upper:8080"),
            ("http_proxy", "http://ignored:1"),
            ("no_proxy", "internal.example"),
        ]);
        assert_eq!(r.https.as_deref(), Some("http://lower:3128"));
        assert_eq!(r.http.as_deref(), Some("http://upper:8080"));
        assert_eq!(r.no_proxy.as_deref(), Some("internal.example"));
        assert_routes(
            &r,
            &[
                ("https://api.openai.com", Some("lower:3128")),
                ("http://gw.example:8000", Some("upper:8080")),
            ],
        );
    }

    #[test]
    fn no_proxy_bypasses_domains_subdomains_and_networks() {
        let r = rules(&[
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NO_PROXY", "example.com, 10.0.0.0/8,localhost"),
        ]);
        assert_routes(
            &r,
            &[
                ("https://example.com", None),
                ("https://api.example.com", None),
                ("https://10.1.2.3:8443", None),
                ("https://localhost:8443", None),
                ("https://notexample.com", Some("proxy:3128")),
            ],
        );
        let everything = rules(&[("HTTPS_PROXY", "http://proxy:3128"), ("NO_PROXY", "*")]);
        assert_routes(&everything, &[("https://api.openai.com", None)]);
    }

    #[test]
    fn all_proxy_covers_both_schemes_and_empty_values_are_unset() {
        let r = rules(&[("ALL_PROXY", "proxy.internal:9000"), ("HTTPS_PROXY", "  ")]);
        assert_eq!(r.https, None);
        assert_routes(
            &r,
            &[
                ("https://x.example", Some("proxy.internal:9000")),
                ("http://x.example", Some("proxy.internal:9000")),
            ],
        );
        assert_eq!(rules(&[]), ProxyRules::default());
        assert_routes(&rules(&[]), &[("https://x.example", None)]);
    }

    #[test]
    fn credentials_become_proxy_authorization_and_leave_messages() {
        let r = rules(&[("HTTPS_PROXY", "http://me:s3cret@proxy:3128")]);
        let route = r
            .route(&"https://x.example".parse().unwrap())
            .unwrap()
            .unwrap();
        // base64("me:s3cret")
        assert_eq!(
            route.authorization.unwrap().to_str().unwrap(),
            "Basic bWU6czNjcmV0"
        );
        assert!(!route.shown.contains("s3cret"), "{}", route.shown);
    }

    #[test]
    fn cgi_ignores_the_environment_and_unsupported_proxies_are_errors() {
        let cgi = rules(&[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "http://evil:1")]);
        assert_eq!(cgi, ProxyRules::default());
        let socks = rules(&[("HTTPS_PROXY", "socks5://proxy:1080")]);
        let error = socks
            .route(&"https://x.example".parse().unwrap())
            .unwrap_err();
        assert!(error.contains("not supported"), "{error}");
    }
}
