//! Streaming hot paths: partial-JSON parsing of a 1 MiB tool argument streamed in 16,384 deltas
//! (compared with one full parse of the same text), and SSE decode throughput.
//!
//! Run: `cargo bench -p agentloop --bench streaming`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use agentloop::providers::partial_json::PartialJson;
use agentloop::providers::sse::SseDecoder;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// A ~1 MiB `write_file`-style argument object as JSON text.
fn big_arguments() -> String {
    let line = "fn main() { println!(\"hello, \\\"world\\\" \u{e9}\"); }\n";
    let mut content = String::new();
    while content.len() < 1024 * 1024 - 64 {
        content.push_str(line);
    }
    json!({"path": "src/main.rs", "content": content}).to_string()
}

fn deltas(text: &str, n: usize) -> Vec<&str> {
    let size = text.len().div_ceil(n);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

fn bench_partial_json(c: &mut Criterion) {
    let text = big_arguments();
    let pieces = deltas(&text, 16_384);
    let mut group = c.benchmark_group("partial_json_1MiB");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function("full_parse_once", |b| {
        b.iter(|| serde_json::from_str::<serde_json::Value>(&text).unwrap())
    });
    group.bench_function("16384_deltas_with_snapshots", |b| {
        b.iter(|| {
            let mut p = PartialJson::new();
            let mut snapshots = 0usize;
            for piece in &pieces {
                if p.push_and_snapshot(piece).is_some() {
                    snapshots += 1;
                }
            }
            // The final value is parsed once from the complete text, as the adapters do.
            let v: serde_json::Value = serde_json::from_str(p.text()).unwrap();
            (snapshots, v)
        })
    });
    group.bench_function("16384_deltas_scan_only", |b| {
        b.iter(|| {
            let mut p = PartialJson::new();
            for piece in &pieces {
                p.push(piece);
            }
            p.into_text().len()
        })
    });
    group.finish();
}

fn bench_sse(c: &mut Criterion) {
    // A realistic Chat Completions stream: ~4 MB of small `data:` events.
    let mut body = String::new();
    let mut i = 0;
    while body.len() < 4 * 1024 * 1024 {
        body.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {i} \"}},\"finish_reason\":null}}]}}\n\n"
        ));
        i += 1;
    }
    let bytes = body.into_bytes();
    let mut group = c.benchmark_group("sse_decode");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.sample_size(20);
    for chunk in [64usize, 1024, 16 * 1024] {
        group.bench_function(format!("chunks_of_{chunk}"), |b| {
            b.iter(|| {
                let mut d = SseDecoder::new();
                let mut out = Vec::new();
                let mut n = 0;
                for piece in bytes.chunks(chunk) {
                    let _ = d.push(piece, &mut out);
                    n += out.len();
                    out.clear();
                }
                n
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_partial_json, bench_sse);
criterion_main!(benches);
