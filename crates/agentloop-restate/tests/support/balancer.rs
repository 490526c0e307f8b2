//! A round-robin HTTP/2 (h2c) load balancer for the tests: the Restate server sees one deployment
//! URI, and each invocation stream goes to the next worker in turn — how workers are deployed
//! behind a load balancer in production. It can also hold back what the server sends to the
//! workers ([`Balancer::start_delayed`]): every acknowledgement then arrives late.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::BodyExt;
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

type Body = BoxBody<bytes::Bytes, hyper::Error>;

/// The balancer; counts the requests each backend received.
pub struct Balancer {
    pub addr: SocketAddr,
    pub per_backend: Arc<Vec<AtomicUsize>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Balancer {
    pub async fn start(backends: Vec<SocketAddr>) -> Balancer {
        Balancer::start_delayed(backends, Duration::ZERO).await
    }

    /// A balancer that delivers each frame the server sends to a worker `delay` after the
    /// previous one was delivered (so each at least `delay` late).
    pub async fn start_delayed(backends: Vec<SocketAddr>, delay: Duration) -> Balancer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let per_backend: Arc<Vec<AtomicUsize>> =
            Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
        // TCP_NODELAY both ways, as the worker sets it (see `Worker::serve`): a proxy that
        // Nagles would add the 40 ms the worker avoids.
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Client<HttpConnector, UnsyncBoxBody<bytes::Bytes, hyper::Error>> =
            Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build(connector);
        let next = Arc::new(AtomicUsize::new(0));
        let backends = Arc::new(backends);
        let counts = per_backend.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let _ = stream.set_nodelay(true);
                let (client, next, backends, counts) = (
                    client.clone(),
                    next.clone(),
                    backends.clone(),
                    counts.clone(),
                );
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let i = next.fetch_add(1, Ordering::Relaxed) % backends.len();
                        counts[i].fetch_add(1, Ordering::Relaxed);
                        let backend = backends[i];
                        let client = client.clone();
                        async move {
                            let (mut parts, body) = req.into_parts();
                            let path = parts
                                .uri
                                .path_and_query()
                                .map(|p| p.as_str().to_owned())
                                .unwrap_or_else(|| "/".into());
                            parts.uri = format!("http://{backend}{path}").parse().unwrap();
                            let body = if delay.is_zero() {
                                body.boxed_unsync()
                            } else {
                                http_body_util::StreamBody::new(futures::stream::unfold(
                                    body,
                                    move |mut body| async move {
                                        let frame = body.frame().await?;
                                        tokio::time::sleep(delay).await;
                                        Some((frame, body))
                                    },
                                ))
                                .boxed_unsync()
                            };
                            let response = client.request(Request::from_parts(parts, body)).await;
                            Ok::<Response<Body>, hyper::Error>(match response {
                                Ok(r) => r.map(|b| b.boxed()),
                                Err(e) => Response::builder()
                                    .status(502)
                                    .body(
                                        http_body_util::Full::new(bytes::Bytes::from(
                                            e.to_string(),
                                        ))
                                        .map_err(|never| match never {})
                                        .boxed(),
                                    )
                                    .unwrap(),
                            })
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Balancer {
            addr,
            per_backend,
            task,
        }
    }
}
