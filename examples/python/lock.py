#!/usr/bin/env python3
"""A lock shared by processes, from stock kazoo: the built-in `lock` recipe
called through wazoo_recipes (clients/python; `pip install ./clients/python`).
Run it a few times at once against `wazoo dev`; each process acquires,
holds 1 s, releases:

    for i in 1 2 3; do python3 examples/python/lock.py & done; wait

Argument: the server (default 127.0.0.1:2181).
"""

import os
import sys
import time

from kazoo.client import KazooClient

from wazoo_recipes import Lock


def main() -> None:
    server = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:2181"
    zk = KazooClient(hosts=server)
    zk.start(timeout=15)
    me = f"pid {os.getpid()}"
    lock = Lock(zk, "/examples/lock", identifier=me.encode())
    start = time.monotonic()
    print(f"{me}: waiting for /examples/lock", flush=True)
    with lock:
        print(f"{me}: acquired after {time.monotonic() - start:.1f} s as {lock.node}", flush=True)
        time.sleep(1)
    print(f"{me}: released", flush=True)
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
