// Shared helpers for the Node drivers: CLI, CPU/RSS probes, W3 bookkeeping.
import { readFileSync } from "node:fs";

export function parseArgs(argv = process.argv.slice(2)) {
  const a = { baseUrl: "", workload: "w1", runs: 200, concurrency: 100 };
  for (let i = 0; i + 1 < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === "--base-url") a.baseUrl = v;
    else if (k === "--workload") a.workload = v;
    else if (k === "--runs") a.runs = Number(v);
    else if (k === "--concurrency") a.concurrency = Number(v);
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.baseUrl) throw new Error("--base-url is required");
  return a;
}
// user+sys CPU of this process in µs (getrusage(RUSAGE_SELF) via libuv).
export const cpuUs = () => { const c = process.cpuUsage(); return c.user + c.system; };
export const nowUs = () => Number(process.hrtime.bigint() / 1000n);
export function rssKib() {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0; // e.g. EMFILE while the sessions hold every descriptor: the sessions report it
  }
}
export function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.round((p / 100) * (sorted.length - 1)))];
}
export const W1_FINAL = "Done: 5 and HI.";
export const w2Final = (i) => `Turn ${i} done.`;
export const W3_FINAL = "Held stream finished.";
export function assert(cond, msg) { if (!cond) throw new Error(`assertion failed: ${msg}`); }

// W3: run `k` sessions concurrently with `session(i)`; sample RSS every 20 ms.
export async function w3(k, toolCalls, session) {
  await new Promise((r) => setTimeout(r, 200));
  if (global.gc) global.gc();
  const rss0 = rssKib();
  let finished = 0, peak = 0, all = 0;
  const timer = setInterval(() => {
    const r = rssKib();
    peak = Math.max(peak, r);
    if (toolCalls() >= 2 * k && finished === 0) all = Math.max(all, r);
  }, 20);
  const t0 = nowUs();
  const spans = await Promise.all(Array.from({ length: k }, async (_, i) => {
    const s = nowUs() - t0;
    await session(i);
    finished++;
    return [s, nowUs() - t0];
  }));
  clearInterval(timer);
  const lat = spans.map(([s, e]) => (e - s) / 1000).sort((x, y) => x - y);
  const lastStart = Math.max(...spans.map((s) => s[0]));
  const firstEnd = Math.min(...spans.map((s) => s[1]));
  return { workload: "w3", concurrency: k, completed: spans.length, tool_calls: toolCalls(),
    all_in_flight: lastStart < firstEnd && all > 0, rss0_kib: rss0, rss_peak_kib: peak,
    rss_all_in_flight_kib: all, lat_ms_p50: percentile(lat, 50), lat_ms_p99: percentile(lat, 99),
    lat_ms_min: lat[0], lat_ms_max: lat[lat.length - 1] };
}
