"""Basic ZooKeeper semantics through kazoo, asserted identically against
Apache ZooKeeper 3.8 and wazoo, standalone and as 3-member ensembles (the
`server` fixture runs each test on all four targets; on an ensemble each
test has its own empty chroot and its clients sit on different members, see
conftest.py). Nothing here depends on standalone-only details such as exact
zxid values: zxids are only compared with each other.

Doc references are to the Apache ZooKeeper 3.8 documentation: the
"ZooKeeper Programmer's Guide" (section names quoted) and the Java API
javadoc of org.apache.zookeeper.ZooKeeper.
"""

from __future__ import annotations

import queue
import re

import pytest
from kazoo.exceptions import (
    BadVersionError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import EventType
from kazoo.security import make_digest_acl

from servers import WAIT


def next_event(events: queue.Queue):
    """The next watch event, waiting at most WAIT seconds."""
    try:
        return events.get(timeout=WAIT)
    except queue.Empty:
        pytest.fail(f"no watch event arrived within {WAIT}s")


def assert_no_earlier_event(zk, events: queue.Queue, sentinel: str = "/sentinel"):
    """Proves that no further event is pending on `events`, without sleeping.

    Sets an exists-watch on a fresh node and creates it: the server sends a
    session's notifications in the order of the changes, and kazoo runs
    watch callbacks in order on one thread, so any stray event caused by an
    earlier change would be queued before the sentinel's NodeCreated.
    """
    assert zk.exists(sentinel, watch=events.put) is None
    zk.create(sentinel)
    event = next_event(events)
    assert (event.type, event.path) == (EventType.CREATED, sentinel), f"unexpected event {event}"


# --- "Programmer's Guide: ZNodes" and "Data Access": create / get / set / delete ---


def test_create_then_get_returns_the_data_and_a_fresh_stat(kazoo_client):
    """Programmer's Guide, "ZooKeeper Stat Structure": a new znode has
    version, cversion and aversion 0, and czxid == mzxid == pzxid."""
    zk = kazoo_client
    assert zk.create("/node", b"hello") == "/node"
    data, stat = zk.get("/node")
    assert data == b"hello"
    assert (stat.version, stat.cversion, stat.aversion) == (0, 0, 0)
    assert stat.dataLength == 5
    assert stat.numChildren == 0
    assert stat.ephemeralOwner == 0
    assert stat.czxid == stat.mzxid == stat.pzxid
    assert stat.ctime == stat.mtime
    assert zk.exists("/node") == stat


def test_set_data_is_conditional_on_the_version(kazoo_client):
    """Programmer's Guide, "ZNodes": "each time a znode's data changes, the
    version number increases"; ZooKeeper.setData javadoc: BadVersion "if the
    given version does not match the node's version"; -1 matches any."""
    zk = kazoo_client
    zk.create("/node", b"v0")
    first = zk.set("/node", b"v1", version=0)
    assert first.version == 1
    assert first.mzxid > first.czxid

    with pytest.raises(BadVersionError):
        zk.set("/node", b"stale", version=0)
    assert zk.get("/node")[0] == b"v1"

    assert zk.set("/node", b"v2", version=-1).version == 2
    assert zk.get("/node")[0] == b"v2"


def test_delete_is_conditional_on_the_version(kazoo_client):
    """ZooKeeper.delete javadoc: BadVersion if the version does not match."""
    zk = kazoo_client
    zk.create("/node", b"x")
    zk.set("/node", b"y")
    with pytest.raises(BadVersionError):
        zk.delete("/node", version=0)
    assert zk.exists("/node") is not None

    zk.delete("/node", version=1)
    assert zk.exists("/node") is None


def test_creating_an_existing_node_raises_node_exists(kazoo_client):
    """ZooKeeper.create javadoc: NodeExists "if a node with the same actual
    path already exists"; the existing node is untouched."""
    zk = kazoo_client
    zk.create("/node", b"first")
    with pytest.raises(NodeExistsError):
        zk.create("/node", b"second")
    assert zk.get("/node")[0] == b"first"


def test_operations_on_a_missing_node_raise_no_node(kazoo_client):
    """ZooKeeper javadoc of getData, setData, delete, getChildren: NoNode if
    no node with the given path exists; create: NoNode if the parent does
    not exist."""
    zk = kazoo_client
    assert zk.exists("/missing") is None
    with pytest.raises(NoNodeError):
        zk.get("/missing")
    with pytest.raises(NoNodeError):
        zk.set("/missing", b"x")
    with pytest.raises(NoNodeError):
        zk.delete("/missing")
    with pytest.raises(NoNodeError):
        zk.get_children("/missing")
    with pytest.raises(NoNodeError):
        zk.create("/missing/child", b"x")


def test_deleting_a_node_with_children_raises_not_empty(kazoo_client):
    """ZooKeeper.delete javadoc: NotEmpty "if the node has children"."""
    zk = kazoo_client
    zk.create("/parent")
    zk.create("/parent/child")
    with pytest.raises(NotEmptyError):
        zk.delete("/parent")
    assert zk.get_children("/parent") == ["child"]


def test_parent_stat_tracks_its_children(kazoo_client):
    """Programmer's Guide, "ZooKeeper Stat Structure": cversion counts
    changes to the children, pzxid is the zxid of the last such change,
    numChildren counts them; the parent's data version does not move."""
    zk = kazoo_client
    zk.create("/parent")
    before = zk.exists("/parent")
    zk.create("/parent/a")
    _, child_stat = zk.get("/parent/a")
    children, after_create = zk.get_children("/parent", include_data=True)
    assert children == ["a"]
    assert after_create.cversion == before.cversion + 1
    assert after_create.numChildren == 1
    assert after_create.pzxid == child_stat.czxid
    assert after_create.version == before.version

    zk.delete("/parent/a")
    after_delete = zk.exists("/parent")
    assert after_delete.cversion == before.cversion + 2
    assert after_delete.numChildren == 0
    assert after_delete.pzxid > after_create.pzxid


# --- "Programmer's Guide: ZooKeeper Watches" -------------------------------------------


def test_exists_watch_on_a_missing_node_fires_node_created(kazoo_client):
    """Programmer's Guide, "ZooKeeper Watches": a watch set by exists() on a
    node that does not exist is triggered by its creation (NodeCreated)."""
    zk = kazoo_client
    events = queue.Queue()
    assert zk.exists("/watched", watch=events.put) is None
    zk.create("/watched", b"x")
    event = next_event(events)
    assert (event.type, event.path) == (EventType.CREATED, "/watched")


def test_data_watch_fires_once_on_change(kazoo_client):
    """Programmer's Guide, "ZooKeeper Watches": "Watches are one time
    triggers": a getData watch fires NodeDataChanged on the next setData,
    and not again on the one after."""
    zk = kazoo_client
    zk.create("/watched", b"0")
    events = queue.Queue()
    zk.get("/watched", watch=events.put)
    zk.set("/watched", b"1")
    event = next_event(events)
    assert (event.type, event.path) == (EventType.CHANGED, "/watched")

    zk.set("/watched", b"2")
    assert_no_earlier_event(zk, events)


def test_data_watch_fires_node_deleted(kazoo_client):
    """Programmer's Guide, "ZooKeeper Watches": a data watch is triggered by
    delete() on the node (NodeDeleted)."""
    zk = kazoo_client
    zk.create("/watched", b"0")
    events = queue.Queue()
    zk.get("/watched", watch=events.put)
    zk.delete("/watched")
    event = next_event(events)
    assert (event.type, event.path) == (EventType.DELETED, "/watched")


def test_children_watch_fires_when_a_child_is_added_or_removed(kazoo_client):
    """Programmer's Guide, "ZooKeeper Watches": a getChildren watch is
    triggered by creating or deleting a child (NodeChildrenChanged), and not
    by a change of a child's data."""
    zk = kazoo_client
    zk.create("/parent")
    events = queue.Queue()

    assert zk.get_children("/parent", watch=events.put) == []
    zk.create("/parent/kid", b"a")
    event = next_event(events)
    assert (event.type, event.path) == (EventType.CHILD, "/parent")

    assert zk.get_children("/parent", watch=events.put) == ["kid"]
    zk.set("/parent/kid", b"b")
    zk.delete("/parent/kid")
    event = next_event(events)
    assert (event.type, event.path) == (EventType.CHILD, "/parent")
    assert_no_earlier_event(zk, events)


# --- "Programmer's Guide: ZNodes": ephemeral and sequence nodes ------------------------


def test_ephemeral_node_is_removed_when_its_session_closes(kazoo_client, kazoo_factory):
    """Programmer's Guide, "Ephemeral Nodes": ephemeral znodes exist as long
    as the session that created them; stat.ephemeralOwner is that session."""
    observer = kazoo_client
    owner = kazoo_factory()
    owner.create("/eph", b"x", ephemeral=True)
    events = queue.Queue()
    stat = observer.exists("/eph", watch=events.put)
    assert stat is not None
    assert stat.ephemeralOwner == owner.client_id[0]

    owner.stop()  # closeSession
    event = next_event(events)
    assert (event.type, event.path) == (EventType.DELETED, "/eph")
    assert observer.exists("/eph") is None


def test_ephemeral_nodes_cannot_have_children(kazoo_client):
    """Programmer's Guide, "Ephemeral Nodes": "ephemeral znodes are not
    allowed to have children" (NoChildrenForEphemerals)."""
    zk = kazoo_client
    zk.create("/eph", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        zk.create("/eph/child")


def test_sequential_nodes_get_a_ten_digit_counter_kept_by_the_parent(kazoo_client):
    """Programmer's Guide, "Sequence Nodes -- Unique Naming": the name gets a
    monotonically increasing counter formatted %010d, maintained by the
    parent (it advances with every child created under it)."""
    zk = kazoo_client
    zk.create("/seq")
    assert zk.create("/seq/job-", b"", sequence=True) == "/seq/job-0000000000"
    assert zk.create("/seq/job-", b"", sequence=True) == "/seq/job-0000000001"
    zk.create("/seq/plain")
    third = zk.create("/seq/job-", b"", sequence=True)
    assert third == "/seq/job-0000000003"
    eph = zk.create("/seq/lock-", b"", ephemeral=True, sequence=True)
    assert re.fullmatch(r"/seq/lock-\d{10}", eph)
    assert eph == "/seq/lock-0000000004"
    assert sorted(zk.get_children("/seq")) == [
        "job-0000000000",
        "job-0000000001",
        "job-0000000003",
        "lock-0000000004",
        "plain",
    ]


# --- ZooKeeper.multi javadoc: "all of them succeed or none" ----------------------------


def test_multi_applies_every_operation_when_all_succeed(kazoo_client):
    """ZooKeeper.multi javadoc: the operations are applied atomically, and
    each gets its own result."""
    zk = kazoo_client
    zk.create("/m", b"v0")
    zk.create("/m/old")
    tx = zk.transaction()
    tx.check("/m", 0)
    tx.create("/m/a", b"a")
    tx.set_data("/m", b"v1")
    tx.delete("/m/old")
    results = tx.commit()
    assert results[0] is True
    assert results[1] == "/m/a"
    assert results[2].version == 1
    assert results[3] is True
    assert zk.get("/m")[0] == b"v1"
    assert zk.get_children("/m") == ["a"]


def test_multi_is_all_or_nothing(kazoo_client):
    """ZooKeeper.multi javadoc: "all of them succeed or none". Per-op results
    as Apache ZooKeeper reports them (DataTree.processTxn of a failed multi):
    the ops before the failing one carry error code 0 (kazoo: RolledBackError),
    the failing op its own error, the ops after it RuntimeInconsistency (-2)."""
    zk = kazoo_client
    zk.create("/m", b"v0")
    tx = zk.transaction()
    tx.create("/m/a", b"a")
    tx.set_data("/m", b"v1")
    tx.check("/m", 5)  # wrong version: the whole transaction fails
    tx.create("/m/b", b"b")
    results = tx.commit()
    assert [type(r) for r in results] == [
        RolledBackError,
        RolledBackError,
        BadVersionError,
        RuntimeInconsistency,
    ]
    assert zk.get("/m")[0] == b"v0"
    assert zk.exists("/m").version == 0
    assert zk.get_children("/m") == []


# --- "Programmer's Guide: ZooKeeper access control using ACLs" -------------------------


def test_digest_acl_denies_readers_without_the_credentials(kazoo_factory):
    """Programmer's Guide, "ZooKeeper access control using ACLs" and
    "Builtin ACL Schemes" (digest: username:password, stored as
    username:base64(sha1(username:password))): without a matching identity,
    getData and setData fail with NoAuth; addAuth with the right password
    grants access; exists() is not ACL-checked."""
    owner = kazoo_factory(auth_data=[("digest", "alice:secret")])
    acl = make_digest_acl("alice", "secret", all=True)
    owner.create("/secret", b"s3", acl=[acl])
    assert owner.get("/secret")[0] == b"s3"
    acls, _ = owner.get_acls("/secret")
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(acl.perms, "digest", acl.id.id)]

    stranger = kazoo_factory()
    with pytest.raises(NoAuthError):
        stranger.get("/secret")
    with pytest.raises(NoAuthError):
        stranger.set("/secret", b"mine")
    assert stranger.exists("/secret") is not None

    impostor = kazoo_factory(auth_data=[("digest", "alice:wrong")])
    with pytest.raises(NoAuthError):
        impostor.get("/secret")

    stranger.add_auth("digest", "alice:secret")
    assert stranger.get("/secret")[0] == b"s3"
