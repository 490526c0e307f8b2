#!/usr/bin/env python3
"""Runs the overhead benchmark once peers and binaries are in place (called by bench/run).

For every (workload, framework) it starts a fresh agentloop-mock process on 127.0.0.1, runs the
driver, checks its JSON line and the mock's own accounting (request count, zero invariant
violations: every tool call in every request had its result), and appends to results/*.jsonl.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "..", "target"))
MOCK = os.path.join(TARGET, "release", "agentloop-mock")
PEERS = os.path.join(HERE, ".peers")
PY = os.path.join(PEERS, "venv", "bin", "python")

FRAMEWORKS = {
    "null-baseline": [os.path.join(TARGET, "release", "null-client")],
    "agentloop": [os.path.join(TARGET, "release", "agentloop-bench-driver")],
    # The same two clients over HTTP/2 with prior knowledge (h2c): concurrent sessions share one
    # connection. Run for W3 only unless named in --only (the peers' clients speak HTTP/1.1 here).
    "null-baseline-h2": [os.path.join(TARGET, "release", "null-client"), "--http", "2"],
    "agentloop-h2": [os.path.join(TARGET, "release", "agentloop-bench-driver"), "--http", "2"],
    # HTTP/2 against a mock that allows 100 concurrent streams per connection (what most
    # providers announce) instead of 100,000: W3 only, unless named in --only.
    "null-baseline-h2-s100": [os.path.join(TARGET, "release", "null-client"), "--http", "2"],
    "agentloop-h2-s100": [os.path.join(TARGET, "release", "agentloop-bench-driver"), "--http", "2"],
    "pi-agent-core": ["node", os.path.join(HERE, "drivers", "pi.mjs")],
    "openai-agents": [PY, os.path.join(HERE, "drivers", "openai_agents.py")],
    "pydantic-ai": [PY, os.path.join(HERE, "drivers", "pydantic_ai.py")],
}
# Extra arguments of the mock per framework.
MOCK_ARGS = {
    "null-baseline-h2-s100": ["--h2-max-streams", "100"],
    "agentloop-h2-s100": ["--h2-max-streams", "100"],
}
W3_HOLD_MS = {100: 2000, 1000: 4000, 10000: 15000}
W3_FINAL = "Held stream finished."


def w3_script(k):
    return {"turns": [
        {"first_byte_delay_ms": 1000, "tool_calls": [
            {"id": "call_add", "name": "add", "arguments": {"a": 2, "b": 3}},
            {"id": "call_upper", "name": "upper", "arguments": {"text": "hi"}}]},
        {"text": W3_FINAL, "chunk_size": 4, "first_byte_delay_ms": W3_HOLD_MS[k], "chunk_delay_ms": 20}]}


def start_mock(script_path, extra=()):
    p = subprocess.Popen([MOCK, "--script", script_path, "--port", "0", *extra], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    assert line.startswith("listening on "), f"mock said {line!r}"
    return p, line[len("listening on "):]


def stop_mock(p):
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    served = violations = None
    for line in err.splitlines():
        if "stopped after" in line:
            parts = line.split()
            served = int(parts[parts.index("after") + 1])
            violations = int(parts[parts.index("requests,") + 1])
    return served, violations, err


# What a peer needs besides the program its command runs.
REQUIRES = {"pi-agent-core": os.path.join(PEERS, "node_modules", "@mariozechner", "pi-agent-core")}


def missing_program(fw):
    """What a framework's command needs and is not installed (else None)."""
    program = FRAMEWORKS[fw][0]
    found = os.path.exists(program) if os.sep in program else shutil.which(program)
    if not found:
        return program
    required = REQUIRES.get(fw)
    return required if required and not os.path.exists(required) else None


def run_one(fw, workload, script_path, runs, k, timeout, env):
    mock, base = start_mock(script_path, MOCK_ARGS.get(fw, ()))
    cmd = FRAMEWORKS[fw] + ["--base-url", base + "/v1", "--workload", workload, "--runs", str(runs),
                            "--concurrency", str(k)]
    rec = {"framework": fw, "workload": workload, "runs": runs, "concurrency": k, "ok": False}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=HERE)
        lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
        if r.returncode != 0 or not lines:
            rec["error"] = (r.stderr or r.stdout)[-1500:]
        else:
            rec = json.loads(lines[-1])
            rec["framework"] = fw  # the driver names its client; the mock's settings are ours
    except subprocess.TimeoutExpired:
        rec["error"] = f"timed out after {timeout}s"
    served, violations, err = stop_mock(mock)
    rec["mock_requests"], rec["mock_violations"] = served, violations
    expected = {"w1": (runs + 1) * 2, "w2": (runs * 25 + 1) * 2, "w3": (k + 1) * 2}[workload]
    if rec.get("ok"):
        if violations != 0 or served != expected:
            rec["ok"] = False
            rec["error"] = f"mock saw {served} requests (expected {expected}), {violations} violations: {err[-500:]}"
    return rec


def med_range(xs):
    return statistics.median(xs), min(xs), max(xs)


def main():
    quick = "--quick" in sys.argv
    only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")]
    frameworks = only[0].split(",") if only else list(FRAMEWORKS)
    # A peer that is not installed (`bench/run --skip-install` on a fresh machine) is skipped
    # with one line, not a traceback in the middle of the run.
    for fw in list(frameworks):
        program = missing_program(fw)
        if program:
            print(f"skipped {fw}: {program} is not installed (bench/run without --skip-install "
                  f"installs the peers)", file=sys.stderr, flush=True)
            frameworks.remove(fw)
    wl = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--workloads=")]
    workloads = wl[0].split(",") if wl else ["w1", "w2", "w3"]
    w1_runs = 20 if quick else 200
    w2_runs = 1 if quick else 20
    ks = [100] if quick else [100, 1000, 10000]
    timeout = 120 if quick else 300
    # W1 per-run CPU is a few hundred µs for the Rust clients: repeat it in fresh processes,
    # interleaved across frameworks, so one noisy process cannot decide a ratio.
    reps = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--w1-reps=")]
    w1_reps = int(reps[0]) if reps else (1 if quick else 5)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out_path = os.path.join(HERE, "results", f"{stamp}{'-quick' if quick else ''}.jsonl")
    env = dict(os.environ)
    env["NODE_PATH"] = os.path.join(PEERS, "node_modules")
    scripts = {"w1": os.path.join(HERE, "scripts", "w1.json"), "w2": os.path.join(HERE, "scripts", "w2.json")}
    for k in ks:
        path = os.path.join(HERE, "results", f"w3-{k}.json")
        with open(path, "w") as f:
            json.dump(w3_script(k), f)
        scripts[f"w3-{k}"] = path
    results = []
    with open(out_path, "w") as out:
        plan = []
        for workload in workloads:
            fws = [fw for fw in frameworks if workload == "w3" or only or "-h2" not in fw]
            if workload == "w1":
                plan += [(workload, fw, 1) for _ in range(w1_reps) for fw in fws]
            else:
                plan += [(workload, fw, k) for fw in fws for k in (ks if workload == "w3" else [1])]
        for workload, fw, k in plan:
            key = f"w3-{k}" if workload == "w3" else workload
            runs = {"w1": w1_runs, "w2": w2_runs, "w3": 1}[workload]
            t = time.time()
            rec = run_one(fw, workload, scripts[key], runs, k, timeout, env)
            rec["elapsed_s"] = round(time.time() - t, 1)
            if workload == "w3":
                rec["hold_ms"] = W3_HOLD_MS[k]
            results.append(rec)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            status = "ok" if rec.get("ok") else "FAILED: " + rec.get("error", "")[-300:]
            print(f"[{workload}{'' if workload != 'w3' else ' K=' + str(k)}] {fw}: {status} ({rec['elapsed_s']}s)",
                  file=sys.stderr, flush=True)
    print(f"results: {out_path}")
    print_table(results)


def print_table(results):
    ok = [r for r in results if r.get("ok")]
    by = {(r["framework"], r["workload"], r.get("concurrency", 1) if r["workload"] == "w3" else 1): r for r in ok}
    print("\nW1 tool round trip (per run, all repetitions pooled; median [min-max])")
    print(f"{'framework':16} {'CPU us/run':>28} {'wall us/run':>28}")
    w1 = {}
    for fw in FRAMEWORKS:
        rs = [r for r in ok if r["framework"] == fw and r["workload"] == "w1"]
        if not rs:
            continue
        c = med_range([x for r in rs for x in r["cpu_us"]])
        w = med_range([x for r in rs for x in r["wall_us"]])
        w1[fw] = c[0]
        print(f"{fw:16} {c[0]:>10.0f} [{c[1]:.0f}-{c[2]:.0f}]{'':>4} {w[0]:>10.0f} [{w[1]:.0f}-{w[2]:.0f}]")
    if "agentloop" in w1:
        a = w1["agentloop"]
        for fw, v in w1.items():
            if fw != "agentloop" and a > 0:
                print(f"  {fw} / agentloop CPU: {v / a:.2f}x")
        if "null-baseline" in w1:
            nb = w1["null-baseline"]
            print(f"  agentloop overhead over null: {a - nb:.0f} us/run; agentloop/null = {a / nb:.2f}x")
    print("\nW2 long conversation (CPU us per user turn; median over sessions)")
    for fw in FRAMEWORKS:
        r = by.get((fw, "w2", 1))
        if not r:
            continue
        t5 = [s[4] for s in r["turn_cpu_us"]]
        t25 = [s[24] for s in r["turn_cpu_us"]]
        m5, m25 = statistics.median(t5), statistics.median(t25)
        print(f"{fw:16} turn5 {m5:>8.0f} [{min(t5)}-{max(t5)}]  turn25 {m25:>8.0f} [{min(t25)}-{max(t25)}]  ratio {m25 / m5:.2f}")
    print("\nW3 concurrency (RSS per session; latency added over the scripted delays)")
    floors = {}
    for r in ok:
        if r["workload"] == "w3" and r["framework"] == "null-baseline":
            floors[r["concurrency"]] = r["lat_ms_min"]
    for r in ok:
        if r["workload"] != "w3":
            continue
        k = r["concurrency"]
        rssk = r["rss_all_in_flight_kib"] or r["rss_peak_kib"]
        per = (rssk - r["rss0_kib"]) / k
        floor = floors.get(k, r["lat_ms_min"])
        print(f"{r['framework']:16} K={k:<6} {per:8.1f} KiB/session  added p50 {r['lat_ms_p50'] - floor:8.1f} ms"
              f"  p99 {r['lat_ms_p99'] - floor:8.1f} ms  all in flight: {r['all_in_flight']}")
    for r in results:
        if not r.get("ok"):
            print(f"FAILED {r['framework']} {r['workload']} K={r.get('concurrency')}: {r.get('error', '')[-200:]}")


if __name__ == "__main__":
    main()
