#!/usr/bin/env python3
"""A lock shared by processes, from stock kazoo: the built-in `lock` recipe
called through wazoo_recipes (clients/python; `pip install ./clients/python`).
Run it a few times at once against `wazoo dev`; each process acquires
/examples/lock, holds it 1 s, releases (the same lock and output as
examples/lock.rs and the Java, Go and C examples, so they can share it):

    for i in 1 2 3; do python3 examples/python/lock.py & done; wait

Arguments: [SERVER [PATH [HOLD_MS]]], defaults 127.0.0.1:2181,
/examples/lock, 1000.
"""

import os
import sys
import time

from kazoo.client import KazooClient

from wazoo_recipes import Lock


def main() -> None:
    server = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:2181"
    path = sys.argv[2] if len(sys.argv) > 2 else "/examples/lock"
    hold = int(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 1.0
    zk = KazooClient(hosts=server)
    zk.start(timeout=15)
    try:
        me = f"pid {os.getpid()}"
        lock = Lock(zk, path, identifier=me.encode())
        start = time.monotonic()
        print(f"{me}: waiting for {path}", flush=True)
        with lock:
            print(f"{me}: acquired after {time.monotonic() - start:.1f} s as {lock.node}", flush=True)
            time.sleep(hold)
        print(f"{me}: released", flush=True)
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    main()
