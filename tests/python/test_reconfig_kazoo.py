"""kazoo's reconfig API (`KazooClient.reconfig`, which sends null for the
fields it is not given) against a 3-member ensemble of each server with
`reconfigEnabled=true` (ZooKeeper Dynamic Reconfiguration). Each test
starts its own ensemble: a reconfig changes the membership, which the
shared ensembles of conftest.py must keep.
"""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError

from conftest import SUPER_DIGEST
from servers import WAIT, start_ensemble


def parse_config(data: bytes) -> tuple[list[str], int]:
    servers, version = [], None
    for line in data.decode().splitlines():
        if line.startswith("version="):
            version = int(line.removeprefix("version="), 16)
        else:
            assert line.startswith("server."), line
            servers.append(line)
    assert version is not None, data
    return servers, version


@pytest.fixture(params=["zookeeper", "wazoo"])
def ensemble(request):
    e = start_ensemble(
        request.param,
        extra_cfg=["reconfigEnabled=true", SUPER_DIGEST],
    )
    yield e
    e.close()


def client(hosts: str, super_user: bool) -> KazooClient:
    zk = KazooClient(
        hosts=hosts,
        timeout=WAIT,
        auth_data=[("digest", "super:test")] if super_user else None,
    )
    zk.start(timeout=WAIT)
    return zk


# ZooKeeper Dynamic Reconfiguration, "Incremental mode" and "Conditional
# reconfig": kazoo removes a follower (only as the super user, only from the
# current version); the other members serve the new configuration and keep
# committing writes.
def test_kazoo_removes_a_follower(ensemble):
    leader = ensemble.leader()
    assert leader is not None
    gone = next(i for i in range(3) if i != leader)
    stay = [i for i in range(3) if i != gone]
    hosts = ",".join(f"127.0.0.1:{ensemble.ports[i]}" for i in stay)

    anyone = client(hosts, super_user=False)
    admin = client(hosts, super_user=True)
    try:
        data, _ = admin.get("/zookeeper/config")
        servers, version = parse_config(data)
        assert len(servers) == 3
        with pytest.raises(NoAuthError):
            anyone.reconfig(joining=None, leaving=str(gone + 1), new_members=None)
        with pytest.raises(BadVersionError):
            admin.reconfig(
                joining=None, leaving=str(gone + 1), new_members=None, from_config=version + 1
            )
        data, stat = admin.reconfig(
            joining=None, leaving=str(gone + 1), new_members=None, from_config=version
        )
        servers, new_version = parse_config(data)
        assert len(servers) == 2
        assert not any(s.startswith(f"server.{gone + 1}=") for s in servers)
        assert stat.mzxid == new_version > version
        anyone.create("/after-reconfig", b"x")
        for i in stay:
            zk = client(f"127.0.0.1:{ensemble.ports[i]}", super_user=False)
            try:
                zk.sync("/")
                deadline = time.monotonic() + WAIT
                while zk.get("/zookeeper/config")[0] != data:
                    assert time.monotonic() < deadline, f"member {i} keeps the old configuration"
                    time.sleep(0.1)
                assert zk.exists("/after-reconfig") is not None
            finally:
                zk.stop()
                zk.close()
    finally:
        for zk in (anyone, admin):
            zk.stop()
            zk.close()
