"""Shared helpers for the Python drivers: CLI, CPU/RSS probes, W3 bookkeeping."""
import argparse
import asyncio
import gc
import resource
import time

W1_FINAL = "Done: 5 and HI."
W3_FINAL = "Held stream finished."


def w2_final(i):
    return f"Turn {i} done."


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--workload", default="w1", choices=["w1", "w2", "w3"])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=100)
    return p.parse_args()


def cpu_us():
    """user+sys CPU of this process (all threads) in µs, getrusage(RUSAGE_SELF)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return int((r.ru_utime + r.ru_stime) * 1_000_000)


def now_us():
    return time.perf_counter_ns() // 1000


def rss_kib():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:  # e.g. EMFILE while the sessions hold every descriptor
        pass
    return 0


def percentile(sorted_vals, p):
    if not sorted_vals:
        return None
    return sorted_vals[min(len(sorted_vals) - 1, round(p / 100 * (len(sorted_vals) - 1)))]


class Counter:
    n = 0


async def w1(runs, counter, run_once):
    await run_once("warm-up", W1_FINAL, None)
    counter.n = 0
    cpu, wall = [], []
    c0, t0 = cpu_us(), now_us()
    for i in range(runs):
        c, t = cpu_us(), now_us()
        await run_once(f"Run {i}: add 2 and 3, upper-case hi.", W1_FINAL, None)
        cpu.append(cpu_us() - c)
        wall.append(now_us() - t)
    ctot, ttot = cpu_us() - c0, now_us() - t0
    assert counter.n == 2 * runs, f"tool invocations {counter.n}"
    return {"workload": "w1", "runs": runs, "tool_calls": counter.n, "cpu_us": cpu, "wall_us": wall,
            "cpu_total_us": ctot, "wall_total_us": ttot}


async def w2(runs, counter, run_once, history_len):
    """run_once(prompt, expect, history) -> new history."""
    await run_once("warm-up", w2_final(0), None)
    counter.n = 0
    cpu, wall = [], []
    for _ in range(runs):
        sc, sw, hist = [], [], None
        for i in range(25):
            c, t = cpu_us(), now_us()
            hist = await run_once(f"Turn {i}: add {i} and 1.", w2_final(i), hist)
            sc.append(cpu_us() - c)
            sw.append(now_us() - t)
        assert history_len(hist) == 100, f"history length {history_len(hist)}"
        cpu.append(sc)
        wall.append(sw)
    assert counter.n == 25 * runs, f"tool invocations {counter.n}"
    return {"workload": "w2", "runs": runs, "tool_calls": counter.n, "turn_cpu_us": cpu, "turn_wall_us": wall}


async def w3(k, counter, run_once):
    await run_once("warm-up", W3_FINAL, None)
    counter.n = 0
    await asyncio.sleep(0.2)
    gc.collect()
    rss0 = rss_kib()
    st = {"finished": 0, "peak": 0, "all": 0, "stop": False}

    async def sampler():
        while not st["stop"]:
            r = rss_kib()
            st["peak"] = max(st["peak"], r)
            if counter.n >= 2 * k and st["finished"] == 0:
                st["all"] = max(st["all"], r)
            await asyncio.sleep(0.02)

    samp = asyncio.create_task(sampler())
    t0 = now_us()

    async def session(i):
        s = now_us() - t0
        await run_once(f"Session {i}", W3_FINAL, None)
        st["finished"] += 1
        return (s, now_us() - t0)

    spans = await asyncio.gather(*(session(i) for i in range(k)))
    st["stop"] = True
    await samp
    assert counter.n == 2 * k, f"tool invocations {counter.n}"
    lat = sorted((e - s) / 1000 for s, e in spans)
    last_start = max(s for s, _ in spans)
    first_end = min(e for _, e in spans)
    return {"workload": "w3", "concurrency": k, "completed": len(spans), "tool_calls": counter.n,
            "all_in_flight": last_start < first_end and st["all"] > 0,
            "rss0_kib": rss0, "rss_peak_kib": st["peak"], "rss_all_in_flight_kib": st["all"],
            "lat_ms_p50": percentile(lat, 50), "lat_ms_p99": percentile(lat, 99),
            "lat_ms_min": lat[0], "lat_ms_max": lat[-1]}


async def dispatch(args, counter, run_once, history_len):
    if args.workload == "w1":
        return await w1(args.runs, counter, run_once)
    if args.workload == "w2":
        return await w2(args.runs, counter, run_once, history_len)
    return await w3(args.concurrency, counter, run_once)
