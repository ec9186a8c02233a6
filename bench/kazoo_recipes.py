#!/usr/bin/env python3
"""kazoo's client-side recipes under contention, for wazoo-bench's `lock` and
`queue` workloads (bench/README.md): SESSIONS threads, each with its own KazooClient
(its own session), loop on one recipe path for a warm-up and then a measured
window, and the figures go to stdout as one JSON object.

  lock:  kazoo's Lock on PATH: acquire, release (one cycle). A shared flag
         counts overlaps (a thread acquiring while another holds: must be 0);
         the holder clears it before its release is sent.
  queue: kazoo's Queue on PATH: put a unique item, then get one (one cycle).
         Afterwards every item must have been taken exactly once or still be
         in the queue: duplicates, foreign (taken but never put) and lost
         items are counted (all must be 0).

A cycle counts if it starts and completes inside the window; its latency
(ns) is listed in `latencies_ns` for the bench's histograms.

  python3 bench/kazoo_recipes.py --hosts 127.0.0.1:2181 --recipe lock \
      --path /bench-lock --sessions 16 --warmup 1 --duration 5
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from kazoo.client import KazooClient


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", required=True)
    p.add_argument("--recipe", choices=["lock", "queue"], required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--sessions", type=int, default=16)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--session-timeout", type=float, default=30.0)
    p.add_argument("--cycle-timeout", type=float, default=10.0)
    a = p.parse_args()

    clients = []
    for _ in range(a.sessions):
        c = KazooClient(hosts=a.hosts, timeout=a.session_timeout)
        c.start(timeout=30)
        clients.append(c)
    clients[0].ensure_path(a.path)

    guard = threading.Lock()
    held = [False]
    overlaps = [0]
    errors: dict[str, int] = {}
    latencies: list[int] = []
    put_items: set[bytes] = set()
    taken: list[bytes] = []
    empty_gets = [0]
    ready = threading.Barrier(a.sessions + 1)
    times = {}

    def error(kind: str) -> None:
        with guard:
            errors[kind] = errors.get(kind, 0) + 1

    def lock_worker(i: int, c: KazooClient) -> None:
        lock = c.Lock(a.path, identifier=f"kazoo-{i}")
        ready.wait()
        start, end = times["start"], times["end"]
        mine = []
        while True:
            t0 = time.perf_counter_ns()
            if t0 >= end:
                break
            try:
                if not lock.acquire(timeout=a.cycle_timeout):
                    error("acquire timeout")
                    continue
                with guard:
                    if held[0]:
                        overlaps[0] += 1
                    held[0] = True
                with guard:
                    held[0] = False
                lock.release()
            except Exception as e:  # noqa: BLE001 (counted, the run goes on)
                error(type(e).__name__)
                continue
            t1 = time.perf_counter_ns()
            if t0 >= start and t1 <= end:
                mine.append(t1 - t0)
        with guard:
            latencies.extend(mine)

    def queue_worker(i: int, c: KazooClient) -> None:
        q = c.Queue(a.path)
        ready.wait()
        start, end = times["start"], times["end"]
        mine, puts, got = [], [], []
        n = 0
        while True:
            t0 = time.perf_counter_ns()
            if t0 >= end:
                break
            n += 1
            item = f"{i}-{n}".encode()
            try:
                q.put(item)
                puts.append(item)
                data = q.get()
                while data is None:
                    # Not expected (this thread's own put is in the queue
                    # until someone takes it), but kazoo's Queue.get does not
                    # wait: poll gently.
                    empty_gets[0] += 1
                    time.sleep(0.001)
                    data = q.get()
                got.append(data)
            except Exception as e:  # noqa: BLE001
                error(type(e).__name__)
                continue
            t1 = time.perf_counter_ns()
            if t0 >= start and t1 <= end:
                mine.append(t1 - t0)
        with guard:
            latencies.extend(mine)
            put_items.update(puts)
            taken.extend(got)

    worker = lock_worker if a.recipe == "lock" else queue_worker
    threads = [
        threading.Thread(target=worker, args=(i, c), daemon=True)
        for i, c in enumerate(clients)
    ]
    for t in threads:
        t.start()
    now = time.perf_counter_ns()
    times["start"] = now + int(a.warmup * 1e9)
    times["end"] = times["start"] + int(a.duration * 1e9)
    ready.wait()
    # The bench samples the servers' CPU at these marks (stderr).
    for mark, at in (("start", times["start"]), ("end", times["end"])):
        time.sleep(max(0, at - time.perf_counter_ns()) / 1e9)
        print(f"wazoo-bench: window {mark}", file=sys.stderr, flush=True)
    for t in threads:
        t.join(timeout=a.warmup + a.duration + a.cycle_timeout + 30)
    stuck = sum(t.is_alive() for t in threads)

    out = {
        "recipe": a.recipe,
        "sessions": a.sessions,
        "window_secs": a.duration,
        "cycles": len(latencies),
        "latencies_ns": latencies,
        "errors": errors,
        "stuck_threads": stuck,
        "kazoo": __import__("kazoo").__version__,
        "python": sys.version.split()[0],
    }
    if a.recipe == "lock":
        out["overlaps"] = overlaps[0]
    else:
        c = clients[0]
        c.sync(a.path)
        remaining = [n for n in c.get_children(a.path) if n.startswith("entry-")]
        taken_set = set(taken)
        out["items_put"] = len(put_items)
        out["items_taken"] = len(taken)
        out["duplicates"] = len(taken) - len(taken_set)
        out["foreign"] = len(taken_set - put_items)
        out["remaining"] = len(remaining)
        out["lost"] = len(put_items) - len(taken_set & put_items) - len(remaining)
        out["empty_gets"] = empty_gets[0]
    for c in clients:
        try:
            c.stop()
            c.close()
        except Exception:  # noqa: BLE001
            pass
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
