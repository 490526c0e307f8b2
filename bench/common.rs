//! Shared by the Rust bench binaries (included with `#[path]`): CLI, CPU and RSS probes, output.
#![allow(dead_code)]

use std::time::Instant;

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
