"""kazoo against a wazoo observer of a running Apache ZooKeeper 3.8
ensemble (zoo.cfg `wazoo.peers=zookeeper`; docs/MIGRATION.md, "Live
migration", phase 1): kazoo clients of the observer and of the ZooKeeper
members see one tree, watches set on the observer fire for writes made on
ZooKeeper, writes through the observer reach ZooKeeper, and kazoo's Lock
recipe hands the lock between a client of the observer and a client of a
ZooKeeper member, in order.

The ZooKeeper ensemble is the test's own: every member has the observer's
`server.4=...:observer` line, as ZooKeeper's Observers guide asks.

Doc references: ZooKeeper Observers Guide ("How to use Observers"),
ZooKeeper Programmer's Guide, "ZooKeeper Watches", ZooKeeper Recipes and
Solutions, "Locks".
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.protocol.states import EventType

from servers import find_wazoo_bin, free_port, server_mode, start_ensemble

STARTUP_TIMEOUT = 60.0


class Observer:
    """`wazoo serve` with the ZooKeeper members' server lines, myid 4 and
    wazoo.peers=zookeeper."""

    def __init__(self, zk_cfg: Path, client_port: int):
        self.dir = Path(tempfile.mkdtemp(prefix="wazoo-py-zk-observer-"))
        data = self.dir / "data"
        data.mkdir()
        (data / "myid").write_text("4\n")
        lines = [
            line
            for line in zk_cfg.read_text().splitlines()
            if line.startswith(("server.", "tickTime=", "initLimit=", "syncLimit="))
        ]
        lines += [
            f"dataDir={data}",
            f"clientPort={client_port}",
            "clientPortAddress=127.0.0.1",
            "peerType=observer",
            "wazoo.peers=zookeeper",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
        ]
        cfg = self.dir / "zoo.cfg"
        cfg.write_text("\n".join(lines) + "\n")
        self.port = client_port
        self.log = self.dir / "wazoo.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(find_wazoo_bin()), "serve", "--config", str(cfg)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                env={"RUST_LOG": "info", "PATH": "/usr/bin:/bin"},
            )

    def wait_observing(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while server_mode("127.0.0.1", self.port) != "observer":
            code = self.proc.poll()
            assert code is None, f"the observer exited ({code}):\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"not observing:\n{self.log.read_text()}"
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_kazoo_clients_of_a_wazoo_observer_and_of_zookeeper_share_one_tree():
    q, e, c = free_port(), free_port(), free_port()
    zk = start_ensemble(
        "zookeeper",
        3,
        tick_time_ms=500,
        extra_cfg=[f"server.4=127.0.0.1:{q}:{e}:observer"],
    )
    observer = None
    clients = []
    try:
        observer = Observer(zk.members[0].dir / "zoo.cfg", c)
        observer.wait_observing()

        def client(hosts: str) -> KazooClient:
            k = KazooClient(hosts=hosts, timeout=10)
            k.start(timeout=15)
            clients.append(k)
            return k

        on_zk = client(zk.hosts)
        on_obs = client(f"127.0.0.1:{c}")

        # A write on ZooKeeper fires a watch set through the observer.
        on_zk.create("/shared", b"zk")
        fired = threading.Event()
        events = []

        def watch(event):
            events.append(event)
            fired.set()

        data, _ = on_obs.get("/shared", watch=watch)
        assert data == b"zk"
        on_zk.set("/shared", b"zk2")
        assert fired.wait(10), "the observer's watch did not fire"
        assert events[0].type == EventType.CHANGED
        on_obs.sync("/shared")
        assert on_obs.get("/shared")[0] == b"zk2"

        # Writes through the observer are ZooKeeper's.
        on_obs.create("/shared/from-observer", b"w")
        on_zk.sync("/")
        assert on_zk.get("/shared/from-observer")[0] == b"w"
        on_obs.delete("/shared/from-observer")
        on_zk.sync("/")
        assert on_zk.exists("/shared/from-observer") is None

        # kazoo's Lock, contended by a client of each side: the one that
        # asked second gets it once the first lets go.
        obs_lock = on_obs.Lock("/lock", "observer")
        zk_lock = on_zk.Lock("/lock", "zookeeper")
        order = []
        assert obs_lock.acquire(timeout=10)
        order.append("observer")

        def take():
            assert zk_lock.acquire(timeout=20)
            order.append("zookeeper")
            zk_lock.release()

        t = threading.Thread(target=take)
        t.start()
        time.sleep(1.0)
        assert order == ["observer"], "the lock was held by two clients at once"
        assert len(zk_lock.contenders()) == 2
        obs_lock.release()
        t.join(30)
        assert order == ["observer", "zookeeper"]
    finally:
        for k in clients:
            k.stop()
            k.close()
        if observer is not None:
            observer.close()
        zk.close()
