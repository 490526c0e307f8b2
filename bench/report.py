#!/usr/bin/env python3
"""Markdown tables for bench/RESULTS.md from one results/*.jsonl file: medians with min-max,
ratios agentloop vs each peer, and each target next to the measured figure."""
import json
import statistics
import sys

ORDER = ["null-baseline", "agentloop", "null-baseline-h2", "agentloop-h2", "null-baseline-h2-s100",
         "agentloop-h2-s100", "pi-agent-core",
         "openai-agents", "pydantic-ai"]


def main(path):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    ok = [r for r in recs if r.get("ok")]
    get = lambda fw, wl, k=None: next((r for r in ok if r["framework"] == fw and r["workload"] == wl
                                       and (k is None or r.get("concurrency") == k)), None)
    print(f"Source: `{path.split('/')[-1]}`\n")
    print("### W1 tool round trip (per agent run: 2 parallel tool calls + final text)\n")
    print("Per-run samples of all repetitions pooled; the last column is the spread of the per-process medians.\n")
    print("| framework | processes × runs | CPU µs/run median (min–max) | wall µs/run median (min–max) | CPU vs agentloop | overhead over null (CPU µs) | per-process CPU medians |")
    print("|---|---|---|---|---|---|---|")
    w1, pooled = {}, {}
    for fw in ORDER:
        rs = [r for r in ok if r["framework"] == fw and r["workload"] == "w1"]
        if rs:
            pooled[fw] = rs
            w1[fw] = statistics.median([x for r in rs for x in r["cpu_us"]])
    for fw, rs in pooled.items():
        c = [x for r in rs for x in r["cpu_us"]]
        w = [x for r in rs for x in r["wall_us"]]
        meds = [statistics.median(r["cpu_us"]) for r in rs]
        ratio = f"{w1[fw] / w1['agentloop']:.2f}×" if "agentloop" in w1 else "–"
        over = f"{w1[fw] - w1['null-baseline']:.0f}" if "null-baseline" in w1 else "–"
        print(f"| {fw} | {len(rs)} × {rs[0]['runs']} | {statistics.median(c):.0f} ({min(c)}–{max(c)}) | "
              f"{statistics.median(w):.0f} ({min(w)}–{max(w)}) | {ratio} | {over} | {min(meds):.0f}–{max(meds):.0f} |")
    print("\n### W2 long conversation (25 user turns, one tool call each, history carried)\n")
    print("| framework | sessions | turn 5 CPU µs median (min–max) | turn 25 CPU µs median (min–max) | turn25/turn5 | mean CPU µs/turn |")
    print("|---|---|---|---|---|---|")
    w2 = {}
    for fw in ORDER:
        r = get(fw, "w2")
        if not r:
            continue
        t5 = [s[4] for s in r["turn_cpu_us"]]
        t25 = [s[24] for s in r["turn_cpu_us"]]
        allt = [x for s in r["turn_cpu_us"] for x in s]
        w2[fw] = statistics.median(t25) / statistics.median(t5)
        print(f"| {fw} | {r['runs']} | {statistics.median(t5):.0f} ({min(t5)}–{max(t5)}) | "
              f"{statistics.median(t25):.0f} ({min(t25)}–{max(t25)}) | {w2[fw]:.2f} | {statistics.mean(allt):.0f} |")
    print("\n### W3 concurrency (sessions held mid-stream by the mock's delays)\n")
    print("| framework | K | all K in flight | RSS₀ MiB | RSS with K in flight MiB | KiB/session | latency p50 / p99 ms | added p50 / p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    floors = {r["concurrency"]: r["lat_ms_min"] for r in ok if r["workload"] == "w3" and r["framework"] == "null-baseline"}
    w3 = {}
    for fw in ORDER:
        for r in sorted((r for r in ok if r["framework"] == fw and r["workload"] == "w3"), key=lambda r: r["concurrency"]):
            k = r["concurrency"]
            rk = r["rss_all_in_flight_kib"] or r["rss_peak_kib"]
            per = (rk - r["rss0_kib"]) / k
            w3[(fw, k)] = per
            fl = floors.get(k, r["lat_ms_min"])
            print(f"| {fw} | {k} | {'yes' if r['all_in_flight'] else 'no (peak RSS used)'} | {r['rss0_kib'] / 1024:.1f} | "
                  f"{rk / 1024:.1f} | {per:.1f} | {r['lat_ms_p50']:.0f} / {r['lat_ms_p99']:.0f} | "
                  f"{r['lat_ms_p50'] - fl:.0f} / {r['lat_ms_p99'] - fl:.0f} |")
    failed = [r for r in recs if not r.get("ok")]
    if failed:
        print("\nRuns that did not complete:\n")
        for r in failed:
            print(f"- {r['framework']} {r['workload']} K={r.get('concurrency')}: {r.get('error', '')[-300:].strip()}")
    print("\n### Targets\n")
    print("| target | measured | met? |")
    print("|---|---|---|")
    a = w1.get("agentloop")
    for fw, need in (("pi-agent-core", 20), ("openai-agents", 50), ("pydantic-ai", 50)):
        if a and fw in w1:
            x = w1[fw] / a
            print(f"| W1 CPU/run ≥{need}× less than {fw} | {x:.1f}× less ({a:.0f} vs {w1[fw]:.0f} µs) | {'yes' if x >= need else 'NO'} |")
    if a and "null-baseline" in w1:
        x = a / w1["null-baseline"]
        print(f"| W1 CPU/run ≤1.5× null baseline | {x:.2f}× ({a:.0f} vs {w1['null-baseline']:.0f} µs) | {'yes' if x <= 1.5 else 'NO'} |")
    if "agentloop" in w2:
        print(f"| W2 turn-25 cost within 1.5× of turn 5 | {w2['agentloop']:.2f}× | {'yes' if w2['agentloop'] <= 1.5 else 'NO'} |")
    for fw, how in (("agentloop", "HTTP/1.1, a connection per session"), ("agentloop-h2", "HTTP/2, one connection")):
        if (fw, 10000) in w3:
            x = w3[(fw, 10000)]
            print(f"| W3 10,000 sessions under 20 KiB RSS/session ({how}) | {x:.1f} KiB/session | {'yes' if x < 20 else 'NO'} |")
    limited, unlimited = get("agentloop-h2-s100", "w3", 10000), get("agentloop-h2", "w3", 10000)
    if limited and unlimited and 10000 in floors:
        x = (limited["lat_ms_p99"] - floors[10000]) / max(unlimited["lat_ms_p99"] - floors[10000], 1e-9)
        print(f"| W3 10,000 sessions over HTTP/2, server allows 100 streams per connection: added p99 ≤ 2× unlimited | {x:.2f}× | {'yes' if x <= 2 else 'NO'} |")


if __name__ == "__main__":
    main(sys.argv[1])
