"""Soak test of `totoc serve`: mixed valid and invalid traffic for a while, then the verdict.

Run through scripts/soak-serve.sh (see its header). Starts the server itself, sends twice `--rate` requests/s during
the warm-up, `--rate` until half of `--duration-s` and twice that for the second half (valid forecasts and a share
of invalid ones),
samples the server's RSS every second, and checks: the server never died (0 crashes), every valid request got the
numbers of the first answer to the same request (0 wrong answers), every status code is a documented one
(200, 400, 404, 405, 408, 413, 429, 503; never 500), and the RSS at the end is at most the RSS after the warm-up
phase (`--warm-s`, default a third of the run, at most 60 s) + 5%. Prints start/warm/end/peak RSS and counts; exits non-zero on
any failed check. Standard library only.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

DOCUMENTED = {200, 400, 404, 405, 408, 413, 429, 503}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def post(url, body, ctype="application/json", timeout=60):
    req = urllib.request.Request(url, data=body, headers={"content-type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        return -1, str(e).encode()


def close(a, b, rel=1e-4):
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in a if k not in ("buckets", "profile")]
        return sorted(keys) == sorted(k for k in b if k not in ("buckets", "profile")) and all(
            close(a[k], b[k], rel) for k in keys
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= rel * max(abs(b), 1e-30)
    return a == b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--totoc", required=True)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--requests", required=True, help="a JSON file: a list of valid /v1/forecast requests")
    ap.add_argument("--duration-s", type=float, default=600)
    ap.add_argument("--warm-s", type=float, default=None)
    ap.add_argument("--rate", type=float, required=True, help="requests/s of the first half (the second: 2x)")
    ap.add_argument("--invalid-share", type=float, default=0.2)
    ap.add_argument("--shadow", action="store_true", help="run the shadow engine (the same engine) at rate 0.1")
    ap.add_argument("--workers", type=int, default=16)
    a = ap.parse_args()
    # The working set forms over the first ~20 s whatever the load (the blocking pool's threads and their
    # allocator arenas come into use as requests overlap; the 60 s runs printed 120 -> 130 MiB up to 18 s, then
    # flat to the end, on an idle and on a loaded machine alike): a tenth of a 60 s run measured before it and
    # called the rest a leak. A leak keeps climbing after it, which the end-vs-warm check still catches.
    warm_s = a.warm_s if a.warm_s is not None else min(a.duration_s / 3, 60.0)
    with open(a.requests) as f:
        valid = json.load(f)

    cmd = [a.totoc, "serve", "--engine", a.engine, "--addr", "127.0.0.1:0", "--grpc-addr", "off"]
    if a.shadow:
        cmd += ["--shadow-engine", a.engine, "--shadow-rate", "0.1"]
    log = open(os.environ.get("SOAK_LOG", "/dev/null"), "w")
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    line = server.stdout.readline().strip()
    base = "http://" + line.split(" ")[-1]
    t0 = time.time()
    while True:
        try:
            with urllib.request.urlopen(base + "/v2/health/ready", timeout=5) as r:
                if r.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError):
            pass
        if time.time() - t0 > 300 or server.poll() is not None:
            print("FAILED: the server never became ready", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.2)

    # The reference answer of every valid request: its first answer.
    reference = []
    for r in valid:
        status, body = post(base + "/v1/forecast", json.dumps(r).encode())
        if status != 200:
            server.kill()
            print(f"FAILED: a valid request of {a.requests} was refused: {status} {body[:300]!r}", file=sys.stderr)
            sys.exit(1)
        reference.append(json.loads(body))
    invalid = [
        (base + "/v1/forecast", b"{not json", "application/json"),
        (base + "/v1/forecast", json.dumps({"target": [[1.0, 2.0]], "horizon": 0}).encode(), "application/json"),
        (base + "/v2/models/nope/infer", b"{}", "application/json"),
        (base + "/v2/models/toto/infer", json.dumps({"inputs": [{"name": "target", "shape": [1, 3],
         "datatype": "FP32", "data": [1, 2]}]}).encode(), "application/json"),
        (base + "/v1/forecast", json.dumps({"target": [[1.0] * 10], "horizon": 10 ** 9}).encode(), "application/json"),
    ]

    codes, wrong, lock = {}, [], threading.Lock()
    rss = {"start": rss_kib(server.pid), "warm": None, "end": None, "peak": 0}
    # RSS and requests answered at each tenth of the run: a leak climbs steadily, a working set that is still
    # filling (buckets loaded on demand, allocator arenas reaching the largest batch) climbs in steps and levels off
    timeline = []
    start = time.time()
    end_at = start + a.duration_s
    sent = [0]

    def one(i):
        if random.random() < a.invalid_share:
            url, body, ctype = random.choice(invalid)
            status, _ = post(url, body, ctype)
        else:
            k = random.randrange(len(valid))
            status, body = post(base + "/v1/forecast", json.dumps(valid[k]).encode())
            if status == 200 and not close(json.loads(body), reference[k]):
                with lock:
                    wrong.append(k)
        with lock:
            codes[status] = codes.get(status, 0) + 1

    def worker(slots):
        while True:
            i = slots.get()
            if i is None:
                return
            one(i)

    import queue
    slots = queue.Queue(maxsize=a.workers * 4)
    threads = [threading.Thread(target=worker, args=(slots,), daemon=True) for _ in range(a.workers)]
    for t in threads:
        t.start()

    def sampler():
        next_mark = a.duration_s / 10
        while time.time() < end_at and server.poll() is None:
            r = rss_kib(server.pid)
            rss["peak"] = max(rss["peak"], r)
            if rss["warm"] is None and time.time() - start >= warm_s:
                rss["warm"] = r
            if time.time() - start >= next_mark:
                with lock:
                    answered = sum(n for c, n in codes.items() if isinstance(c, int))
                timeline.append((next_mark, r, answered))
                next_mark += a.duration_s / 10
            time.sleep(1)

    st = threading.Thread(target=sampler, daemon=True)
    st.start()
    next_at = start
    while time.time() < end_at and server.poll() is None:
        # The warm-up runs at the peak rate (the allocator and the runtime reach their working size under the
        # heaviest load), then the first half at 1x, the second at 2x: growth after the warm-up is what leaks.
        t = time.time() - start
        rate = 2 * a.rate if t < warm_s or t >= a.duration_s / 2 else a.rate
        next_at += 1.0 / rate
        delay = next_at - time.time()
        if delay > 0:
            time.sleep(delay)
        try:
            slots.put_nowait(sent[0])
            sent[0] += 1
        except queue.Full:
            with lock:
                codes["client_backlog"] = codes.get("client_backlog", 0) + 1
    for _ in threads:
        slots.put(None)
    for t in threads:
        t.join(timeout=120)
    crashed = server.poll() is not None
    rss["end"] = rss_kib(server.pid) if not crashed else 0
    st.join(timeout=5)
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()

    print(f"soak: {a.duration_s:.0f} s, {sent[0]} requests ({2 * a.rate:g}/s warm-up, {a.rate:g}/s, then "
          f"{2 * a.rate:g}/s); codes {codes}")
    print(f"soak: RSS start {rss['start'] / 1024:.0f} MiB, after warm-up {(rss['warm'] or 0) / 1024:.0f} MiB, "
          f"end {rss['end'] / 1024:.0f} MiB, peak {rss['peak'] / 1024:.0f} MiB")
    print("soak: RSS over time: " + ", ".join(f"{t:.0f} s {r / 1024:.0f} MiB ({n} answered)" for t, r, n in timeline))
    if codes.get("client_backlog"):
        print(f"soak: {codes['client_backlog']} requests were not sent: every client worker was busy "
              f"(raise --workers / SOAK_WORKERS to offer the full rate)")
    failures = []
    if crashed:
        failures.append(f"the server died (exit {server.returncode})")
    if wrong:
        failures.append(f"{len(wrong)} wrong answers")
    odd = {c: n for c, n in codes.items() if isinstance(c, int) and c not in DOCUMENTED}
    if odd:
        failures.append(f"undocumented status codes {odd}")
    if rss["warm"] and rss["end"] > rss["warm"] * 1.05:
        failures.append(f"RSS grew: end {rss['end']} KiB > warm-up {rss['warm']} KiB + 5%")
    if failures:
        print("FAILED: " + "; ".join(failures), file=sys.stderr)
        sys.exit(1)
    print("soak: OK (0 crashes, 0 wrong answers, only documented codes, RSS within 5% of the warm-up)")


if __name__ == "__main__":
    main()
