//! The provider transport below the adapters: TLS against a local rustls server (ALPN choosing
//! HTTP/2 or HTTP/1.1, extra root certificates, an untrusted certificate refused), proxies (a
//! CONNECT tunnel for `https://`, a forwarded request for `http://`, `NO_PROXY` bypassing
//! them) and the pool's idle reaper closing connections after `pool_idle_timeout` on Tokio's
//! paused clock.
//!
//! The local TLS server terminates TLS and splices the plain bytes to the testkit mock server
//! (which serves HTTP/1.1 and h2c on one port); the proxy splices too, after reading the
//! request head it was sent. Both record what they saw.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentloop::model::{Model, ModelError, ModelEvent, ModelRequest};
use agentloop::providers::{
    HttpVersion, OpenAiChat, ProviderConfig, Proxy, ProxyRules, RetryPolicy,
};
use agentloop::transcript::Message;
use agentloop_testkit::{MockServer, Script, Turn};
use futures::StreamExt;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &str = "Over the wire.";

/// A throw-away certificate authority and the certificate it signed for `localhost` and
/// `127.0.0.1`, made once per test process: nothing checked in can expire.
struct TestPki {
    ca_pem: String,
    cert: CertificateDer<'static>,
    key: Vec<u8>,
}

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "agentloop transport test CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let server_key = KeyPair::generate().unwrap();
        let mut server =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.use_authority_key_identifier_extension = true;
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = server.signed_by(&server_key, &issuer).unwrap();
        TestPki {
            ca_pem: ca_cert.pem(),
            cert: cert.der().clone(),
            key: server_key.serialize_der(),
        }
    })
}

fn mock() -> MockServer {
    MockServer::start(Script::new(vec![Turn::text(ANSWER)]).with_repeat(true))
}

/// A hang guard only: everything here takes milliseconds.
async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the transport test hung")
}

/// One call's terminal: the reply's text, or the error.
async fn ask(model: &OpenAiChat) -> Result<String, ModelError> {
    let events: Vec<ModelEvent> = within(
        model
            .stream(ModelRequest::new(vec![Message::user("hi")]))
            .collect(),
    )
    .await;
    match events.into_iter().last() {
        Some(ModelEvent::Done(message)) => Ok(message.text()),
        Some(ModelEvent::Error { error, .. }) => Err(error),
        other => panic!("no terminal event: {other:?}"),
    }
}

fn config(base: String) -> ProviderConfig {
    ProviderConfig::new(base)
        .api_key("sk-test")
        .model("m")
        .retry(RetryPolicy::none())
        // Whatever the machine's environment says: each test names its proxy.
        .proxy(Proxy::Disabled)
}

/// [`config`] for `https://localhost:PORT/v1` (the TLS server at `addr`), trusting the test CA.
fn trusting(addr: SocketAddr) -> ProviderConfig {
    config(format!("https://localhost:{}/v1", addr.port())).add_root_certificate_pem(&pki().ca_pem)
}

/// The address the mock server listens on, for a splice in front of it.
fn address(server: &MockServer) -> SocketAddr {
    server
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap()
}

/// Copies bytes both ways until either side ends.
async fn splice(
    mut a: TcpStream,
    mut b: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
) {
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

/// A local TLS server for `localhost` offering `alpn`, splicing to `upstream`. Records the
/// protocol ALPN chose for each connection.
async fn tls_server(upstream: SocketAddr, alpn: &[&[u8]]) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let certs = vec![pki().cert.clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki().key.clone()));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let negotiated = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&negotiated);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to serve.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    seen.lock().unwrap().push("handshake failed".to_owned());
                    return;
                };
                let protocol = tls
                    .get_ref()
                    .1
                    .alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).into_owned());
                seen.lock()
                    .unwrap()
                    .push(protocol.unwrap_or_else(|| "none".to_owned()));
                let Ok(plain) = TcpStream::connect(upstream).await else {
                    return;
                };
                splice(plain, tls).await;
            });
        }
    });
    (addr, negotiated)
}

#[tokio::test]
async fn tls_with_an_extra_root_negotiates_http2_or_http1_by_alpn() {
    let server = mock();
    let upstream = address(&server);
    let (both, negotiated) = tls_server(upstream, &[b"h2", b"http/1.1"]).await;
    for (version, expected) in [
        (HttpVersion::Auto, "h2"),
        (HttpVersion::Http1Only, "http/1.1"),
        (HttpVersion::Http2PriorKnowledge, "h2"),
    ] {
        let model = OpenAiChat::new(trusting(both).http_version(version));
        assert_eq!(ask(&model).await.unwrap(), ANSWER, "{version:?}");
        // The second request reuses the connection.
        assert_eq!(ask(&model).await.unwrap(), ANSWER, "{version:?}");
        let seen = std::mem::take(&mut *negotiated.lock().unwrap());
        assert_eq!(seen, vec![expected.to_owned()], "{version:?}");
    }
    // A server without HTTP/2: `Auto` falls back to HTTP/1.1 and keeps working.
    let (http1, negotiated) = tls_server(upstream, &[b"http/1.1"]).await;
    let model = OpenAiChat::new(trusting(http1));
    for _ in 0..3 {
        assert_eq!(ask(&model).await.unwrap(), ANSWER);
    }
    assert_eq!(*negotiated.lock().unwrap(), vec!["http/1.1".to_owned()]);
    assert_eq!(server.request_count(), 9);
}

#[tokio::test]
async fn a_certificate_nobody_vouches_for_is_refused_and_nothing_is_sent() {
    let server = mock();
    let upstream = address(&server);
    let (addr, _) = tls_server(upstream, &[b"h2", b"http/1.1"]).await;
    // Without the test CA: only the system's roots, which do not know it.
    let model = OpenAiChat::new(config(format!("https://localhost:{}/v1", addr.port())));
    let error = ask(&model).await.unwrap_err().to_string();
    assert!(
        error.contains("certificate") || error.contains("root certificates"),
        "{error}"
    );
    assert_eq!(server.request_count(), 0);
}

/// A proxy on a local port: records the head of each connection's first request (a CONNECT
/// or a forwarded request), answers a CONNECT with 200, and splices to `upstream` (the
/// tunnel's target, or the server a forwarded request names, which the tests make the same).
async fn proxy(upstream: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                seen.lock().unwrap().push(text.clone());
                let mut server = TcpStream::connect(upstream).await.unwrap();
                if text.starts_with("CONNECT ") {
                    client
                        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .await
                        .unwrap();
                } else {
                    // Forwarded as it came (the mock server takes the absolute URL too).
                    server.write_all(&head).await.unwrap();
                }
                splice(client, server).await;
            });
        }
    });
    (addr, heads)
}

/// Proxy rules as the environment would give them (`from_lookup` is what `from_env` runs).
fn env_rules(vars: &[(&str, String)]) -> Proxy {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    Proxy::Rules(ProxyRules::from_lookup(|name| vars.get(name).cloned()))
}

#[tokio::test]
async fn https_goes_through_the_proxy_from_the_environment_in_a_connect_tunnel() {
    let server = mock();
    let upstream = address(&server);
    let (tls, _) = tls_server(upstream, &[b"h2", b"http/1.1"]).await;
    let (proxy_addr, heads) = proxy(tls).await;
    let model = OpenAiChat::new(trusting(tls).proxy(env_rules(&[
        ("https_proxy", format!("http://agent:pr0xy-pw@{proxy_addr}")),
        ("NO_PROXY", "example.com".to_owned()),
    ])));
    assert_eq!(ask(&model).await.unwrap(), ANSWER);
    assert_eq!(ask(&model).await.unwrap(), ANSWER);
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "one tunnel, reused: {heads:?}");
    let authority = format!("localhost:{}", tls.port());
    assert!(
        heads[0].starts_with(&format!(
            "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
        )),
        "{heads:?}"
    );
    // base64("agent:pr0xy-pw")
    assert!(
        heads[0].contains("Proxy-Authorization: Basic YWdlbnQ6cHIweHktcHc=\r\n"),
        "{heads:?}"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn plain_http_is_forwarded_by_the_proxy_with_the_whole_url() {
    let server = mock();
    let upstream = address(&server);
    let (proxy_addr, heads) = proxy(upstream).await;
    let base = format!("{}/v1", server.base_url());
    let model = OpenAiChat::new(
        config(base.clone()).proxy(env_rules(&[("HTTP_PROXY", format!("http://{proxy_addr}"))])),
    );
    assert_eq!(ask(&model).await.unwrap(), ANSWER);
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with(&format!("POST {base}/chat/completions HTTP/1.1\r\n")),
        "{heads:?}"
    );
    assert!(
        heads[0].contains("authorization: Bearer sk-test"),
        "{heads:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn no_proxy_bypasses_the_proxy() {
    let server = mock();
    let upstream = address(&server);
    let (tls, _) = tls_server(upstream, &[b"h2", b"http/1.1"]).await;
    let (proxy_addr, heads) = proxy(tls).await;
    for no_proxy in ["localhost", ".localhost,10.0.0.0/8", "*"] {
        let model = OpenAiChat::new(trusting(tls).proxy(env_rules(&[
            ("HTTPS_PROXY", format!("http://{proxy_addr}")),
            ("no_proxy", no_proxy.to_owned()),
        ])));
        assert_eq!(ask(&model).await.unwrap(), ANSWER, "{no_proxy}");
    }
    assert!(heads.lock().unwrap().is_empty(), "the proxy was used");
    assert_eq!(server.request_count(), 3);
}

/// A splice in front of `upstream` that reports (on the returned receiver) each time a client
/// closes its side of a connection.
async fn close_observer(
    upstream: SocketAddr,
) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed, observed) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let closed = closed.clone();
            tokio::spawn(async move {
                let server = TcpStream::connect(upstream).await.unwrap();
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                });
                // Ends when the client closes the connection (or it breaks).
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                let _ = closed.send(());
            });
        }
    });
    (addr, observed)
}

/// One request over `version`, then the idle time on a paused clock: the connection stays
/// open until `pool_idle_timeout`, and is closed by the client once it passed.
async fn idle_connection_is_closed_after_the_idle_time(version: HttpVersion) {
    let server = mock();
    let upstream = address(&server);
    let (addr, mut closed) = close_observer(upstream).await;
    let idle = Duration::from_secs(30);
    let model = OpenAiChat::new(
        config(format!("http://{addr}/v1"))
            .http_version(version)
            .pool_idle_timeout(idle),
    );
    assert_eq!(ask(&model).await.unwrap(), ANSWER);
    tokio::time::pause();
    tokio::time::advance(idle - Duration::from_secs(1)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        closed.try_recv().is_err(),
        "{version:?}: closed before its idle time"
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    tokio::time::resume();
    within(closed.recv()).await.expect("the observer ended");
    assert_eq!(server.connection_count(), 1);
    // The pool is usable after shrinking: the next request opens a new connection.
    assert_eq!(ask(&model).await.unwrap(), ANSWER);
    assert_eq!(server.connection_count(), 2);
}

#[tokio::test]
async fn an_idle_http1_connection_is_closed_after_the_pool_idle_timeout() {
    idle_connection_is_closed_after_the_idle_time(HttpVersion::Http1Only).await;
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_after_the_pool_idle_timeout() {
    idle_connection_is_closed_after_the_idle_time(HttpVersion::Http2PriorKnowledge).await;
}
