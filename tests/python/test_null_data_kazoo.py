"""Null data through kazoo, asserted identically against Apache ZooKeeper
3.8 and wazoo, standalone and as 3-member ensembles (conftest.py).

Programmer's Guide, "ZooKeeper Data Model": a znode's data may be null,
and ZooKeeper keeps it null, apart from empty data. kazoo sends a value of
None as a null buffer (length -1) in create and set, and returns null data
from get as None; dataLength is 0 for both null and empty data. kazoo's
transactions take bytes only, so multi ops are covered by the C and Java
client tests (host/tests/null_data.rs).
"""

from __future__ import annotations


def test_create_with_null_data_reads_back_none(kazoo_client, kazoo_factory):
    zk = kazoo_client
    zk.create("/null", None)
    zk.create("/empty", b"")
    data, stat = zk.get("/null")
    assert data is None
    assert stat.dataLength == 0
    assert zk.get("/empty") == (b"", zk.exists("/empty"))
    # Another session (on an ensemble, on another member) reads the same.
    other = kazoo_factory()
    other.sync("/null")
    assert other.get("/null")[0] is None
    assert other.get("/empty")[0] == b""


def test_set_with_null_data_reads_back_none(kazoo_client, kazoo_factory):
    zk = kazoo_client
    zk.create("/n", b"x")
    stat = zk.set("/n", None)
    assert (stat.version, stat.dataLength) == (1, 0)
    data, stat = zk.get("/n")
    assert data is None
    assert stat.version == 1
    zk.set("/n", b"")
    assert zk.get("/n")[0] == b""
    zk.set("/n", None)
    other = kazoo_factory()
    other.sync("/n")
    data, stat = other.get("/n")
    assert data is None
    assert (stat.version, stat.dataLength) == (3, 0)
