//! Shared by the Rust bench binaries (included with `#[path]`): CLI, CPU and RSS probes, the
//! tools' schemas, and the three workloads with their output, run against any [`Subject`].
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub struct Args {
    pub base_url: String,
    pub workload: String,
    pub runs: usize,
    pub concurrency: usize,
    /// `--http 2`: HTTP/2 with prior knowledge (h2c) instead of HTTP/1.1.
    pub http2: bool,
}

pub fn args() -> Args {
    let mut a = Args { base_url: String::new(), workload: "w1".into(), runs: 200, concurrency: 100, http2: false };
    let v: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i + 1 < v.len() {
        match v[i].as_str() {
            "--base-url" => a.base_url = v[i + 1].clone(),
            "--workload" => a.workload = v[i + 1].clone(),
            "--runs" => a.runs = v[i + 1].parse().unwrap_or(200),
            "--concurrency" => a.concurrency = v[i + 1].parse().unwrap_or(100),
            "--http" => a.http2 = v[i + 1] == "2",
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    assert!(!a.base_url.is_empty(), "--base-url is required");
    a
}

/// user+sys CPU of this process (all threads), microseconds, from getrusage(RUSAGE_SELF).
pub fn cpu_us() -> u64 {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// VmRSS of this process in KiB.
pub fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub fn us_since(t: Instant) -> u64 {
    t.elapsed().as_micros() as u64
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

pub const W1_FINAL: &str = "Done: 5 and HI.";
pub fn w2_final(i: usize) -> String {
    format!("Turn {i} done.")
}
pub const W3_FINAL: &str = "Held stream finished.";

/// W3 after the warm-up: starts `k` sessions at once (`session(i)` runs session i and asserts its
/// outcome), samples RSS every 20 ms, and reports RSS while all `k` are in flight (every session
/// has run its 2 tools and none has finished), the peak, and the latency percentiles.
pub async fn w3_sessions<F, Fut>(k: usize, tool_calls: &'static AtomicU64, session: F) -> serde_json::Value
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let session = Arc::new(session);
    tool_calls.store(0, Relaxed);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss0 = rss_kib();
    let finished = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (finished, stop) = (finished.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut peak, mut all) = (0u64, 0u64);
            while stop.load(Relaxed) == 0 {
                let r = rss_kib();
                peak = peak.max(r);
                if tool_calls.load(Relaxed) >= 2 * k as u64 && finished.load(Relaxed) == 0 {
                    all = all.max(r);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (peak, all)
        })
    };
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(k);
    // The size of one session's task future (what its tokio task holds besides the heap).
    let mut future_bytes = 0;
    for i in 0..k {
        let (session, finished) = (session.clone(), finished.clone());
        // The session's future is made where it is awaited: made outside and moved in, the
        // task would hold it twice (the captured value and the awaited copy), and W3 would
        // count the harness's copy as the client's memory.
        let task = async move {
            let s = us_since(t0);
            session(i).await;
            finished.fetch_add(1, Relaxed);
            (s, us_since(t0))
        };
        future_bytes = std::mem::size_of_val(&task);
        handles.push(tokio::spawn(task));
    }
    let mut spans = Vec::with_capacity(k);
    for h in handles {
        spans.push(h.await.expect("session panicked"));
    }
    stop.store(1, Relaxed);
    let (peak, all) = sampler.await.expect("sampler");
    let tools = tool_calls.load(Relaxed);
    assert_eq!(tools, 2 * k as u64, "tool invocations");
    let mut lat: Vec<f64> = spans.iter().map(|(s, e)| (e - s) as f64 / 1000.0).collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    let last_start = spans.iter().map(|s| s.0).max().unwrap_or(0);
    let first_end = spans.iter().map(|s| s.1).min().unwrap_or(0);
    serde_json::json!({"workload": "w3", "concurrency": k, "completed": spans.len(), "tool_calls": tools,
           "all_in_flight": last_start < first_end && all > 0,
           "session_future_bytes": future_bytes, "rss0_kib": rss0, "rss_peak_kib": peak, "rss_all_in_flight_kib": all,
           "lat_ms_p50": percentile(&lat, 50.0), "lat_ms_p99": percentile(&lat, 99.0),
           "lat_ms_min": lat.first(), "lat_ms_max": lat.last()})
}

/// The calls the tools (`add`, `upper`) have answered in the current workload.
pub static TOOL_CALLS: AtomicU64 = AtomicU64::new(0);

/// The arguments of the `add` tool: two integers.
pub fn add_params() -> Value {
    json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
           "required": ["a", "b"], "additionalProperties": false})
}

/// The arguments of the `upper` tool: a text.
pub fn upper_params() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}},
           "required": ["text"], "additionalProperties": false})
}

/// What the workloads measure: something that answers a prompt on a conversation with the
/// final text, calling the tools on the way (an agent, or the null client).
pub trait Subject: Send + Sync + Sized + 'static {
    /// The output's `framework` (`-h2` is appended with `--http 2`).
    const FRAMEWORK: &'static str;
    /// A conversation, carried from turn to turn.
    type History: Default + Send + 'static;
    /// Built from the command line, before any request.
    fn new(a: &Args) -> Self;
    /// Answers `prompt` on `history` (which the turn extends) with the final text.
    fn answer(&self, history: &mut Self::History, prompt: String) -> impl Future<Output = String> + Send;
    /// Checks the history of a W2 session after its 25 turns.
    fn check_session(_history: &Self::History) {}
}

/// A bench binary's `main`: runs the workload `--workload` names and prints one JSON line.
pub fn main<S: Subject>() {
    let a = args();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut v = rt.block_on(async {
        match a.workload.as_str() {
            "w1" => w1::<S>(&a).await,
            "w2" => w2::<S>(&a).await,
            "w3" => w3::<S>(&a).await,
            w => panic!("unknown workload {w}"),
        }
    });
    let framework = if a.http2 { format!("{}-h2", S::FRAMEWORK) } else { S::FRAMEWORK.to_owned() };
    v["framework"] = json!(framework);
    v["ok"] = json!(true);
    println!("{v}");
}

/// W1: `runs` independent runs of one prompt with two tool calls; CPU and wall time of each.
async fn w1<S: Subject>(a: &Args) -> Value {
    let subject = S::new(a);
    // warm-up run (connection pool, lazy statics), not measured
    assert_eq!(subject.answer(&mut S::History::default(), "warm-up".into()).await, W1_FINAL);
    TOOL_CALLS.store(0, Relaxed);
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    let (c0, t0) = (cpu_us(), Instant::now());
    for i in 0..a.runs {
        let (c, t) = (cpu_us(), Instant::now());
        let prompt = format!("Run {i}: add 2 and 3, upper-case hi.");
        let text = subject.answer(&mut S::History::default(), prompt).await;
        assert_eq!(text, W1_FINAL, "final text mismatch");
        cpu.push(cpu_us() - c);
        wall.push(us_since(t));
    }
    let (ctot, ttot) = (cpu_us() - c0, us_since(t0));
    let tools = TOOL_CALLS.load(Relaxed);
    assert_eq!(tools, 2 * a.runs as u64, "tool invocations");
    json!({"workload": "w1", "runs": a.runs, "tool_calls": tools, "cpu_us": cpu, "wall_us": wall,
           "cpu_total_us": ctot, "wall_total_us": ttot})
}

/// W2: `runs` sessions of 25 turns each, one tool call a turn; CPU and wall time of each turn.
async fn w2<S: Subject>(a: &Args) -> Value {
    let subject = S::new(a);
    assert_eq!(subject.answer(&mut S::History::default(), "warm-up".into()).await, w2_final(0));
    TOOL_CALLS.store(0, Relaxed);
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..a.runs {
        let (mut sc, mut sw) = (Vec::new(), Vec::new());
        let mut history = S::History::default();
        for i in 0..25 {
            let (c, t) = (cpu_us(), Instant::now());
            let text = subject.answer(&mut history, format!("Turn {i}: add {i} and 1.")).await;
            assert_eq!(text, w2_final(i), "final text mismatch");
            sc.push(cpu_us() - c);
            sw.push(us_since(t));
        }
        S::check_session(&history);
        cpu.push(sc);
        wall.push(sw);
    }
    let tools = TOOL_CALLS.load(Relaxed);
    assert_eq!(tools, 25 * a.runs as u64, "tool invocations");
    json!({"workload": "w2", "runs": a.runs, "tool_calls": tools, "turn_cpu_us": cpu, "turn_wall_us": wall})
}

/// W3: `concurrency` sessions at once after a warm-up (see [`w3_sessions`]).
async fn w3<S: Subject>(a: &Args) -> Value {
    let subject = Arc::new(S::new(a));
    assert_eq!(subject.answer(&mut S::History::default(), "warm-up".into()).await, W3_FINAL);
    w3_sessions(a.concurrency, &TOOL_CALLS, move |i| {
        let subject = subject.clone();
        async move {
            let text = subject.answer(&mut S::History::default(), format!("Session {i}")).await;
            assert_eq!(text, W3_FINAL, "final text mismatch");
        }
    })
    .await
}
