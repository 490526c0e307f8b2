#!/usr/bin/env python3
"""W1 CPU per run, side by side: REPS processes of each client, interleaved, each against a fresh
agentloop-mock, 200 runs per process; prints the median of all per-run samples and its ratio to
the null client's.

    bench/w1-side-by-side.py [REPS] [NAME=BINARY ...]

Uses the release binaries under $CARGO_TARGET_DIR (default: the repository's target/); extra
NAME=BINARY pairs add other builds of a driver (e.g. the tree before a change) to the same run.
"""
import json
import os
import signal
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RELEASE = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(HERE, "..", "target")), "release")
MOCK = os.path.join(RELEASE, "agentloop-mock")
SCRIPT = os.path.join(HERE, "scripts", "w1.json")


def one(cmd):
    mock = subprocess.Popen([MOCK, "--script", SCRIPT, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        base = mock.stdout.readline().strip().split()[-1]
        out = subprocess.run(cmd + ["--base-url", base + "/v1", "--workload", "w1", "--runs", "200"],
                             capture_output=True, text=True, timeout=300, check=True)
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.communicate(timeout=30)
    return json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])["cpu_us"]


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    clients = {"null-client": [os.path.join(RELEASE, "null-client")],
               "agentloop": [os.path.join(RELEASE, "agentloop-bench-driver")]}
    for extra in sys.argv[2:]:
        name, path = extra.split("=", 1)
        clients[name] = [path]
    samples = {name: [] for name in clients}
    medians = {name: [] for name in clients}
    for _ in range(reps):
        for name, cmd in clients.items():
            cpu = one(cmd)
            samples[name] += cpu
            medians[name].append(statistics.median(cpu))
    null = statistics.median(samples["null-client"])
    for name in clients:
        m = statistics.median(samples[name])
        print(f"{name:12} {m:7.1f} µs/run  ({m / null:.2f}× the null client; per-process medians "
              f"{min(medians[name]):.0f}–{max(medians[name]):.0f})")
    print("load average %.1f %.1f %.1f" % os.getloadavg())


if __name__ == "__main__":
    main()
