"""kazoo against a wazoo member of a running Apache ZooKeeper 3.8
ensemble (zoo.cfg `wazoo.peers=zookeeper`; docs/MIGRATION.md, "Live
migration"), as an observer (phase 1) and as a follower that votes
(phase 2): kazoo clients of the wazoo member and of the ZooKeeper members
see one tree, watches set on wazoo fire for writes made on ZooKeeper,
writes through wazoo reach ZooKeeper, and kazoo's Lock recipe hands the
lock between a client of wazoo and a client of a ZooKeeper member, in
order.

The ZooKeeper ensemble is the test's own: every member has wazoo's
`server.N` line (`...:observer` for an observer), as ZooKeeper's
Observers guide and Administrator's Guide ask.

Doc references: ZooKeeper Observers Guide ("How to use Observers"),
ZooKeeper Internals, "Atomic Broadcast", ZooKeeper Programmer's Guide,
"ZooKeeper Watches", ZooKeeper Recipes and Solutions, "Locks".
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


class WazooMember:
    """`wazoo serve` with the ZooKeeper members' server lines, `myid` and
    wazoo.peers=zookeeper: an observer, or a participant that follows."""

    def __init__(self, zk_cfg: Path, client_port: int, myid: int, observer: bool):
        self.mode = "observer" if observer else "follower"
        self.dir = Path(tempfile.mkdtemp(prefix="wazoo-py-zk-member-"))
        data = self.dir / "data"
        data.mkdir()
        (data / "myid").write_text(f"{myid}\n")
        lines = [
            line
            for line in zk_cfg.read_text().splitlines()
            if line.startswith(("server.", "tickTime=", "initLimit=", "syncLimit="))
        ]
        lines += [
            f"dataDir={data}",
            f"clientPort={client_port}",
            "clientPortAddress=127.0.0.1",
            *(["peerType=observer"] if observer else []),
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

    def wait_serving(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while server_mode("127.0.0.1", self.port) != self.mode:
            code = self.proc.poll()
            assert code is None, f"wazoo exited ({code}):\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"not {self.mode}:\n{self.log.read_text()}"
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_kazoo_clients_of_a_wazoo_observer_and_of_zookeeper_share_one_tree():
    """Three ZooKeeper members and wazoo as server.4, an observer."""

    def scenario(zk, wazoo_hosts: str) -> None:
        kazoo_clients_share_one_tree(zk.hosts, wazoo_hosts)

    with_wazoo_member(3, observer=True, scenario=scenario)


def test_kazoo_clients_of_a_wazoo_follower_and_of_zookeeper_share_one_tree():
    """Two ZooKeeper members and wazoo as server.3. With the ZooKeeper
    member that does not lead killed, every write, kazoo's lock included,
    commits only with wazoo's ACK."""

    def scenario(zk, wazoo_hosts: str) -> None:
        leader = zk.leader()
        assert leader is not None, zk.modes()
        zk.kill(1 - leader)
        kazoo_clients_share_one_tree(f"127.0.0.1:{zk.members[leader].port}", wazoo_hosts)

    with_wazoo_member(2, observer=False, scenario=scenario)


def with_wazoo_member(zk_members: int, observer: bool, scenario) -> None:
    """Runs `scenario(zk, wazoo_hosts)` with a ZooKeeper ensemble of
    `zk_members` and wazoo as the next member, serving."""
    q, e, c = free_port(), free_port(), free_port()
    myid = zk_members + 1
    line = f"server.{myid}=127.0.0.1:{q}:{e}" + (":observer" if observer else "")
    zk = start_ensemble("zookeeper", zk_members, tick_time_ms=500, extra_cfg=[line])
    try:
        member = WazooMember(zk.members[0].dir / "zoo.cfg", c, myid, observer)
        try:
            member.wait_serving()
            scenario(zk, f"127.0.0.1:{c}")
        finally:
            member.close()
    finally:
        zk.close()


def kazoo_clients_share_one_tree(zk_hosts: str, wazoo_hosts: str) -> None:
    """A kazoo client of ZooKeeper (`zk_hosts`) and one of the wazoo member
    (`wazoo_hosts`): watches, writes both ways, and kazoo's Lock."""
    clients = []
    try:

        def client(hosts: str) -> KazooClient:
            k = KazooClient(hosts=hosts, timeout=10)
            k.start(timeout=15)
            clients.append(k)
            return k

        on_zk = client(zk_hosts)
        on_wazoo = client(wazoo_hosts)

        # A write on ZooKeeper fires a watch set through wazoo.
        on_zk.create("/shared", b"zk")
        fired = threading.Event()
        events = []

        def watch(event):
            events.append(event)
            fired.set()

        data, _ = on_wazoo.get("/shared", watch=watch)
        assert data == b"zk"
        on_zk.set("/shared", b"zk2")
        assert fired.wait(10), "the watch set through wazoo did not fire"
        assert events[0].type == EventType.CHANGED
        on_wazoo.sync("/shared")
        assert on_wazoo.get("/shared")[0] == b"zk2"

        # Writes through wazoo are ZooKeeper's.
        on_wazoo.create("/shared/from-wazoo", b"w")
        on_zk.sync("/")
        assert on_zk.get("/shared/from-wazoo")[0] == b"w"
        on_wazoo.delete("/shared/from-wazoo")
        on_zk.sync("/")
        assert on_zk.exists("/shared/from-wazoo") is None

        # kazoo's Lock, contended by a client of each side: the one that
        # asked second gets it once the first lets go.
        wazoo_lock = on_wazoo.Lock("/lock", "wazoo")
        zk_lock = on_zk.Lock("/lock", "zookeeper")
        order = []
        assert wazoo_lock.acquire(timeout=10)
        order.append("wazoo")

        def take():
            assert zk_lock.acquire(timeout=20)
            order.append("zookeeper")
            zk_lock.release()

        t = threading.Thread(target=take)
        t.start()
        time.sleep(1.0)
        assert order == ["wazoo"], "the lock was held by two clients at once"
        assert len(zk_lock.contenders()) == 2
        wazoo_lock.release()
        t.join(30)
        assert order == ["wazoo", "zookeeper"]
    finally:
        for k in clients:
            k.stop()
            k.close()
