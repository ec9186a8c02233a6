"""Watch removal (ZooKeeper 3.5+'s removeWatches and checkWatches) through a
kazoo session, asserted identically against Apache ZooKeeper 3.8 and wazoo,
standalone and as 3-member ensembles (all four targets, standalone servers
shared as the ensembles are: conftest.serve_shared_target).

kazoo 2.11 has no remove_watches(): the two requests are sent as raw
requests on kazoo's connection (the opcodes and records of ZooKeeper's jute
protocol, RemoveWatchesRequest and CheckWatchesRequest: a path and a
WatcherType, Children 1, Data 2, Any 3). kazoo keeps its own callback
registered; what is checked is the server's side: whether the watch is
still there (checkWatches, an event or none).

Doc references: ZooKeeper Programmer's Guide, "Remove Watches", and the
Java API javadoc of ZooKeeper.removeWatches / removeAllWatches.
"""

from __future__ import annotations

import queue
from collections import namedtuple

import pytest
from conftest import connect, serve_shared_target
from kazoo.exceptions import NoWatcherError
from kazoo.protocol.serialization import int_struct, write_string
from kazoo.protocol.states import EventType

from servers import TARGETS, WAIT

CHILDREN, DATA, ANY = 1, 2, 3


@pytest.fixture(params=TARGETS)
def server(request):
    yield from serve_shared_target(request, request.param)


class _WatchesRequest(namedtuple("_WatchesRequest", "path watcher_type")):
    def serialize(self):
        b = bytearray()
        b.extend(write_string(self.path))
        b.extend(int_struct.pack(self.watcher_type))
        return b

    @classmethod
    def deserialize(cls, _bytes, _offset):
        return True


class CheckWatches(_WatchesRequest):
    type = 17  # ZooDefs.OpCode.checkWatches


class RemoveWatches(_WatchesRequest):
    type = 18  # ZooDefs.OpCode.removeWatches


def call(zk, request_class, path: str, watcher_type: int):
    """Sends the raw request (the path under the client's chroot, as
    kazoo's own calls do) and waits for its answer."""
    async_result = zk.handler.async_result()
    zk._call(request_class(zk.chroot + path, watcher_type), async_result)
    return async_result.get(timeout=WAIT)


def has_watch(zk, path: str, watcher_type: int) -> bool:
    try:
        return call(zk, CheckWatches, path, watcher_type)
    except NoWatcherError:
        return False


def next_event(events: queue.Queue):
    try:
        return events.get(timeout=WAIT)
    except queue.Empty:
        pytest.fail(f"no watch event arrived within {WAIT}s")


def no_event_before_the_sentinel(zk, events: queue.Queue, sentinel: str):
    """No event is pending on `events`: the server sends a session's
    notifications in the order of the changes, so a NodeCreated for a fresh
    sentinel node comes after anything an earlier change caused."""
    assert zk.exists(sentinel, watch=events.put) is None
    zk.create(sentinel)
    event = next_event(events)
    assert (event.type, event.path) == (EventType.CREATED, sentinel), f"unexpected {event}"


def test_a_removed_data_watch_never_fires(kazoo_client):
    """"Remove Watches": removeWatches(path, Data) removes the data watch
    set by getData; a later change sends no event."""
    zk = kazoo_client
    zk.create("/n", b"0")
    events: queue.Queue = queue.Queue()
    zk.get("/n", watch=events.put)
    assert has_watch(zk, "/n", DATA) is True
    assert has_watch(zk, "/n", CHILDREN) is False
    assert call(zk, RemoveWatches, "/n", DATA) is True
    assert has_watch(zk, "/n", DATA) is False
    zk.set("/n", b"1")
    no_event_before_the_sentinel(zk, events, "/sentinel")


def test_removing_a_watch_that_is_not_there_is_no_watcher(kazoo_client):
    """ZooKeeper.removeWatches javadoc: NoWatcherException "if there is no
    watcher of the given type on the path"; a child watch is not a data
    watch, and a node without watches has none of either."""
    zk = kazoo_client
    zk.create("/n")
    for watcher_type in (CHILDREN, DATA, ANY):
        with pytest.raises(NoWatcherError):
            call(zk, RemoveWatches, "/n", watcher_type)
        with pytest.raises(NoWatcherError):
            call(zk, CheckWatches, "/n", watcher_type)
    zk.get_children("/n", watch=lambda e: None)
    with pytest.raises(NoWatcherError):
        call(zk, RemoveWatches, "/n", DATA)
    # A missing path is NoWatcher too, not NoNode.
    with pytest.raises(NoWatcherError):
        call(zk, RemoveWatches, "/missing", ANY)


def test_removing_any_removes_the_child_and_the_data_watch(kazoo_client):
    """"Remove Watches": WatcherType.Any removes both kinds."""
    zk = kazoo_client
    zk.create("/n")
    events: queue.Queue = queue.Queue()
    zk.get("/n", watch=events.put)
    zk.get_children("/n", watch=events.put)
    assert has_watch(zk, "/n", ANY) is True
    assert call(zk, RemoveWatches, "/n", ANY) is True
    assert has_watch(zk, "/n", CHILDREN) is False
    assert has_watch(zk, "/n", DATA) is False
    zk.create("/n/child")
    zk.set("/n", b"changed")
    no_event_before_the_sentinel(zk, events, "/sentinel")


def test_another_sessions_watch_on_the_same_server_stays(server, kazoo_client):
    """"Remove Watches": a session removes its own watches only; another
    session's watch on the same path and server still fires. ZooKeeper
    3.8's checkWatches (and so removeWatches' NoWatcher check) looks the
    path up in the server's watch table without regard to whose watch it
    is: a session with no watch of its own is told there is one while
    another session on that server has one (wazoo answers the same)."""
    zk = kazoo_client
    # Same member as zk (kazoo_client is the test's client 0 and connects
    # without shuffling to the first host of server.hosts).
    other = connect(server.hosts, randomize_hosts=False)
    try:
        zk.create("/n")
        zk.create("/lone")
        mine: queue.Queue = queue.Queue()
        theirs: queue.Queue = queue.Queue()
        zk.get("/n", watch=mine.put)
        other.sync("/n")
        other.get("/n", watch=theirs.put)
        other.get("/lone", watch=theirs.put)
        assert call(zk, RemoveWatches, "/n", ANY) is True
        assert has_watch(other, "/n", DATA) is True
        # The table quirk: zk never watched /lone, and removed its /n watch.
        assert has_watch(zk, "/lone", DATA) is True
        assert has_watch(zk, "/n", DATA) is True
        assert has_watch(zk, "/lone", CHILDREN) is False
        zk.set("/n", b"changed")
        event = next_event(theirs)
        assert (event.type, event.path) == (EventType.CHANGED, "/n")
        no_event_before_the_sentinel(zk, mine, "/sentinel")
    finally:
        other.stop()
        other.close()


def test_an_exists_watch_on_a_missing_node_is_a_data_watch(kazoo_client):
    """Programmer's Guide, "ZooKeeper Watches": exists sets a data watch,
    also on a node that does not exist; removeWatches(Children) leaves it,
    removeWatches(Data) removes it."""
    zk = kazoo_client
    events: queue.Queue = queue.Queue()
    assert zk.exists("/later", watch=events.put) is None
    with pytest.raises(NoWatcherError):
        call(zk, RemoveWatches, "/later", CHILDREN)
    assert has_watch(zk, "/later", DATA) is True
    assert call(zk, RemoveWatches, "/later", DATA) is True
    zk.create("/later")
    no_event_before_the_sentinel(zk, events, "/sentinel")
