"""kazoo's read-only mode (`KazooClient(read_only=True)`) against Apache
ZooKeeper 3.8 and wazoo: on a standalone server such a client is an
ordinary read-write client; on a 3-member ensemble whose member is cut off
from its quorum (both others killed) it connects to that member as
read-only (KeeperState.CONNECTED_RO), reads what was committed and has its
writes refused with NotReadOnly, while a client that does not allow
read-only mode is not served there.

The ensembles here are the test's own (it kills two members), started with
read-only mode enabled: ZooKeeper's system property
`-Dreadonlymode.enabled=true`, wazoo's zoo.cfg key `readonlymode.enabled`
(docs/OPERATIONS.md), and wazoo without its built-in recipe modules, which
nothing here calls.

Doc references: ZooKeeper Administrator's Guide, "Experimental Options /
Features" (readonlymode.enabled), ZooKeeper Programmer's Guide, "ZooKeeper
Sessions" (read-only mode, isro) and the four letter word `isro`
("ZooKeeper Commands").
"""

from __future__ import annotations

import time

import pytest
from conftest import connect, serve_shared_target
from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.protocol.states import KeeperState

from servers import FLAVORS, start_ensemble


@pytest.fixture(params=FLAVORS)
def server(request):
    yield from serve_shared_target(request, request.param)


def test_a_read_only_client_of_a_standalone_server_reads_and_writes(kazoo_factory):
    """Programmer's Guide, "ZooKeeper Sessions": read-only mode only matters
    to a member partitioned from its quorum; a standalone server serves the
    client read-write."""
    zk = kazoo_factory(read_only=True)
    assert zk.client_state == KeeperState.CONNECTED
    assert zk.create("/rw", b"x") == "/rw"
    assert zk.get("/rw")[0] == b"x"


def read_only_ensemble(flavor: str):
    if flavor == "zookeeper":
        return start_ensemble(
            flavor,
            jvm_flags=["-Dreadonlymode.enabled=true"],
            extra_cfg=["localSessionsEnabled=true"],
        )
    return start_ensemble(
        flavor, extra_cfg=["readonlymode.enabled=true", "wazoo.recipes.builtin=false"]
    )


def wait_until(what: str, cond, bound: float = 60.0):
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {bound}s")
        time.sleep(0.1)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_member_cut_off_from_its_quorum_serves_read_only_clients(flavor):
    """Administrator's Guide, readonlymode.enabled: the last member left
    answers isro with "ro" and srvr with Mode: read-only; kazoo with
    read_only=True connects as CONNECTED_RO, reads the committed data and
    gets NotReadOnly for a write; kazoo without it is not served. With
    the others back, the member serves read-write again."""
    ensemble = read_only_ensemble(flavor)
    try:
        writer = connect(ensemble.hosts)
        writer.create("/ro", b"committed")
        writer.stop()
        writer.close()
        survivor = ensemble.members[0]
        # Every member has applied the create before two of them die.
        probe = connect(survivor.hosts)
        probe.sync("/ro")
        assert probe.get("/ro")[0] == b"committed"
        probe.stop()
        probe.close()
        ensemble.kill(1)
        ensemble.kill(2)
        wait_until(f"{flavor}: member 0 answers isro with ro", lambda: _isro(survivor) == "ro")
        assert survivor.mode() == "read-only"

        ro = connect(survivor.hosts, read_only=True)
        try:
            assert ro.client_state == KeeperState.CONNECTED_RO
            assert ro.get("/ro")[0] == b"committed"
            assert ro.exists("/missing") is None
            assert sorted(ro.get_children("/")) == ["ro", "zookeeper"]
            with pytest.raises(NotReadOnlyCallError):
                ro.create("/write", b"refused")
            with pytest.raises(NotReadOnlyCallError):
                ro.set("/ro", b"refused")
        finally:
            ro.stop()
            ro.close()

        rw = KazooClient(hosts=survivor.hosts, timeout=10.0, connection_retry={"max_tries": 0})
        try:
            with pytest.raises(Exception):
                rw.start(timeout=3)
            assert rw.client_state != KeeperState.CONNECTED
        finally:
            rw.stop()
            rw.close()

        ensemble.restart(1)
        wait_until(
            f"{flavor}: member 0 serves read-write again",
            lambda: survivor.mode() in ("leader", "follower"),
        )
        again = connect(survivor.hosts)
        try:
            assert again.client_state == KeeperState.CONNECTED
            assert again.set("/ro", b"writable").version == 1
        finally:
            again.stop()
            again.close()
    finally:
        ensemble.close()


def _isro(member) -> str | None:
    try:
        return member.four_letter("isro")
    except OSError:
        return None
