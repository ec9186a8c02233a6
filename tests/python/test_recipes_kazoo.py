"""kazoo's own recipes (kazoo.recipe: Lock, Semaphore, Election, Barrier,
DoubleBarrier, Queue, LockingQueue, Counter, Party, ShallowParty,
ChildrenWatch, DataWatch) built on the standard operations, asserted
identically against Apache ZooKeeper 3.8 and wazoo, standalone and as
3-member ensembles (the `server` fixture: each test runs on all four
targets; on an ensemble the clients of a test sit on different members).

These are the client-side recipes of the "ZooKeeper Recipes and Solutions"
page (section names quoted per test), not wazoo's server-side recipe
modules: only znodes, sequence numbers, ephemerals and watches are used,
so any difference from ZooKeeper here is a difference in those.
"""

from __future__ import annotations

import queue
import threading

import pytest
from conftest import serve_shared_target

from servers import TARGETS, WAIT


@pytest.fixture(params=TARGETS)
def server(request):
    """All four targets; the standalone servers are shared by the tests of
    the session as the ensembles are (conftest.serve_shared_target)."""
    yield from serve_shared_target(request, request.param)


def in_thread(fn, *args) -> tuple[threading.Thread, queue.Queue]:
    """Runs fn(*args) on a daemon thread; its result (or exception) lands in
    the returned queue."""
    out: queue.Queue = queue.Queue()

    def run():
        try:
            out.put(("ok", fn(*args)))
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out.put(("error", e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def result(out: queue.Queue, what: str):
    try:
        kind, value = out.get(timeout=WAIT)
    except queue.Empty:
        pytest.fail(f"{what} did not finish within {WAIT}s")
    if kind == "error":
        raise value
    return value


def still_waiting(out: queue.Queue) -> bool:
    return out.empty()


def eventually(read, expected, what: str):
    """Reads until `read()` == expected, for at most WAIT seconds (another
    client's node shows up once its request is applied)."""
    got = read()
    for _ in range(int(WAIT / 0.05)):
        if got == expected:
            return
        threading.Event().wait(0.05)
        got = read()
    assert got == expected, what


# --- "ZooKeeper Recipes and Solutions", "Locks" ----------------------------------------


def test_lock_excludes_a_second_client_until_released(kazoo_factory):
    """"Locks": the lowest sequence node holds the lock; the next one
    watches its predecessor and gets the lock when it goes away."""
    a, b = kazoo_factory(), kazoo_factory()
    lock_a = a.Lock("/lock", "alice")
    lock_b = b.Lock("/lock", "bob")
    assert lock_a.acquire(timeout=WAIT) is True
    assert lock_b.acquire(blocking=False) is False
    _, got = in_thread(lock_b.acquire, True, WAIT)
    # Both contend, in the order they asked (kazoo orders the contenders'
    # nodes by sequence number).
    eventually(lock_a.contenders, ["alice", "bob"], "bob's node behind alice's")
    assert still_waiting(got)
    lock_a.release()
    assert result(got, "bob's acquire after alice released") is True
    assert lock_a.contenders() == ["bob"]
    lock_b.release()
    a.sync("/lock")
    assert lock_a.contenders() == []


def test_lock_of_a_closed_session_is_released(kazoo_factory):
    """"Locks": the lock node is ephemeral, so the holder's session ending
    hands the lock on."""
    a, b = kazoo_factory(), kazoo_factory()
    assert a.Lock("/lock", "alice").acquire(timeout=WAIT) is True
    waiter = b.Lock("/lock", "bob")
    _, got = in_thread(waiter.acquire, True, WAIT)
    a.stop()
    assert result(got, "bob's acquire after alice's session closed") is True
    assert waiter.contenders() == ["bob"]


def test_read_locks_share_and_a_write_lock_waits(kazoo_factory):
    """"Shared Locks": readers hold together; a writer waits for them."""
    a, b, c = kazoo_factory(), kazoo_factory(), kazoo_factory()
    r1, r2 = a.ReadLock("/rw", "r1"), b.ReadLock("/rw", "r2")
    assert r1.acquire(timeout=WAIT) is True
    assert r2.acquire(timeout=WAIT) is True
    writer = c.WriteLock("/rw", "w")
    assert writer.acquire(blocking=False) is False
    _, got = in_thread(writer.acquire, True, WAIT)
    r1.release()
    b.sync("/rw")
    assert still_waiting(got)
    r2.release()
    assert result(got, "the writer after both readers released") is True
    writer.release()


def test_semaphore_admits_max_leases_holders(kazoo_factory):
    """A semaphore built on a lock and a lease directory (kazoo's Semaphore,
    after "Locks"): at most max_leases holders; the next waits for one."""
    a, b, c = kazoo_factory(), kazoo_factory(), kazoo_factory()
    s = [z.Semaphore("/sem", ident, max_leases=2) for z, ident in ((a, "a"), (b, "b"), (c, "c"))]
    assert s[0].acquire(timeout=WAIT) is True
    assert s[1].acquire(timeout=WAIT) is True
    assert sorted(s[2].lease_holders()) == ["a", "b"]
    assert s[2].acquire(blocking=False) is False
    _, got = in_thread(s[2].acquire, True, WAIT)
    s[0].release()
    assert result(got, "the third lease after one was released") is True
    c.sync("/sem")
    assert sorted(s[2].lease_holders()) == ["b", "c"]
    s[1].release()
    s[2].release()
    a.sync("/sem")
    assert s[0].lease_holders() == []


# --- "Leader Election" -----------------------------------------------------------------


def test_election_runs_the_first_contender_then_the_next(kazoo_factory):
    """"Leader Election": the lowest sequence node leads; when it is gone
    the next one leads."""
    a, b = kazoo_factory(), kazoo_factory()
    ea, eb = a.Election("/election", "alice"), b.Election("/election", "bob")
    led: queue.Queue = queue.Queue()
    alice_may_resign = threading.Event()

    def alice_leads():
        led.put("alice")
        alice_may_resign.wait(WAIT)

    _, alice_done = in_thread(ea.run, alice_leads)
    assert led.get(timeout=WAIT) == "alice"
    _, bob_done = in_thread(eb.run, led.put, "bob")
    eventually(ea.contenders, ["alice", "bob"], "bob's candidate node behind alice's")
    assert led.empty()
    alice_may_resign.set()
    result(alice_done, "alice's run")
    assert led.get(timeout=WAIT) == "bob"
    result(bob_done, "bob's run")
    a.sync("/election")
    assert ea.contenders() == []


# --- "Barriers" and "Double Barriers" ----------------------------------------------------


def test_barrier_wait_returns_once_the_barrier_is_removed(kazoo_factory):
    """"Barriers": clients wait until the barrier node is gone."""
    a, b = kazoo_factory(), kazoo_factory()
    barrier = a.Barrier("/barrier")
    barrier.create()
    waiter = b.Barrier("/barrier")
    b.sync("/barrier")
    assert waiter.wait(timeout=0.2) is False
    _, got = in_thread(waiter.wait, WAIT)
    assert barrier.remove() is True
    assert result(got, "the wait after remove") is True
    assert barrier.remove() is False  # already gone
    assert waiter.wait(timeout=0) is True


def test_double_barrier_enters_and_leaves_together(kazoo_factory):
    """"Double Barriers": nobody starts until all have entered, nobody
    finishes until all have left."""
    clients = [kazoo_factory() for _ in range(3)]
    barriers = [z.DoubleBarrier("/double", 3, f"p{i}") for i, z in enumerate(clients)]
    entering = [in_thread(b.enter)[1] for b in barriers[:2]]
    clients[0].sync("/double")
    assert all(still_waiting(e) for e in entering)
    barriers[2].enter()
    for e in entering:
        result(e, "enter once the third arrived")
    # kazoo names each member's node with a fresh uuid and writes the
    # identifier into it.
    children = clients[0].get_children("/double")
    assert len(children) == 4 and "ready" in children
    assert sorted(clients[0].get(f"/double/{c}")[0] for c in children if c != "ready") == [
        b"p0",
        b"p1",
        b"p2",
    ]
    leaving = [in_thread(b.leave)[1] for b in barriers[:2]]
    barriers[2].leave()
    for e in leaving:
        result(e, "leave")
    clients[0].sync("/double")
    assert clients[0].get_children("/double") == []


# --- "Queues" and "Priority Queues" --------------------------------------------------------


def test_queue_gives_items_by_priority_then_order(kazoo_factory):
    """"Queues" and "Priority Queues": sequence nodes taken lowest first; a
    priority prefix orders before the sequence number."""
    a, b = kazoo_factory(), kazoo_factory()
    producer, consumer = a.Queue("/queue"), b.Queue("/queue")
    for value, priority in ((b"first", 100), (b"second", 100), (b"urgent", 10), (b"last", 200)):
        producer.put(value, priority=priority)
    b.sync("/queue")
    assert len(consumer) == 4
    assert [consumer.get() for _ in range(4)] == [b"urgent", b"first", b"second", b"last"]
    assert consumer.get() is None
    # The producer may sit on another member: it sees the consumer's
    # deletes once it syncs (Programmer's Guide, "Consistency Guarantees").
    a.sync("/queue")
    assert len(producer) == 0


def test_locking_queue_hands_an_entry_to_one_consumer_until_consumed(kazoo_factory):
    """"Queues": kazoo's LockingQueue locks an entry while a consumer works
    on it; a second consumer gets the next one, and a get waits for a put."""
    a, b, c = kazoo_factory(), kazoo_factory(), kazoo_factory()
    producer = a.LockingQueue("/lq")
    producer.put_all([b"one", b"two"])
    first, second = b.LockingQueue("/lq"), c.LockingQueue("/lq")
    assert first.get(timeout=WAIT) == b"one"
    assert first.holds_lock() is True
    assert second.get(timeout=WAIT) == b"two"
    assert first.consume() is True
    assert second.release() is True  # back in the queue, unconsumed
    assert first.get(timeout=WAIT) == b"two"
    assert first.consume() is True
    _, got = in_thread(second.get, WAIT)
    producer.put(b"three", priority=1)
    assert result(got, "a get waiting for a put") == b"three"
    assert second.consume() is True
    assert len(producer) == 0


# --- Counter and Party (kazoo's, on "ZooKeeper Recipes and Solutions" ideas) ---------------


def test_counter_counts_every_increment_of_concurrent_clients(kazoo_factory):
    """A counter kept with conditional setData (Programmer's Guide,
    "ZNodes": the version check): concurrent increments all count."""
    clients = [kazoo_factory() for _ in range(3)]
    counters = [z.Counter("/counter") for z in clients]
    assert counters[0].value == 0

    def bump(counter):
        for _ in range(10):
            counter += 1

    threads = [in_thread(bump, c)[1] for c in counters]
    for t in threads:
        result(t, "ten increments")
    clients[1].sync("/counter")
    assert counters[1].value == 30
    counters[1] -= 5
    assert counters[1].pre_value == 30 and counters[1].post_value == 25
    float_counter = clients[2].Counter("/float", default=0.5)
    float_counter += 1.25
    assert float_counter.value == 1.75


def test_party_lists_its_members_and_an_ended_session_leaves(kazoo_factory):
    """"Group Membership" as kazoo's Party (ephemeral sequence nodes) and
    ShallowParty (ephemeral nodes named after the member)."""
    a, b, c = kazoo_factory(), kazoo_factory(), kazoo_factory()
    for kind in ("Party", "ShallowParty"):
        path = f"/{kind.lower()}"
        pa, pb = getattr(a, kind)(path, "alice"), getattr(b, kind)(path, "bob")
        pa.join()
        pb.join()
        viewer = getattr(c, kind)(path)
        c.sync(path)
        assert sorted(viewer) == ["alice", "bob"]
        assert len(viewer) == 2
        pa.leave()
        c.sync(path)
        assert list(viewer) == ["bob"]
    b.stop()
    c.sync("/party")
    assert list(c.Party("/party")) == []
    assert list(c.ShallowParty("/shallowparty")) == []


# --- kazoo.recipe.watchers: "ZooKeeper Watches" kept set ------------------------------------


def test_children_watch_reports_every_change_in_order(kazoo_factory):
    """Programmer's Guide, "ZooKeeper Watches": a child watch fires on a
    child's creation and deletion; ChildrenWatch sets it again each time
    and calls back with the new list."""
    a, b = kazoo_factory(), kazoo_factory()
    a.ensure_path("/kids")
    seen: queue.Queue = queue.Queue()
    a.ChildrenWatch("/kids", lambda children: seen.put(sorted(children)))
    assert seen.get(timeout=WAIT) == []
    b.create("/kids/x")
    assert seen.get(timeout=WAIT) == ["x"]
    b.create("/kids/y")
    assert seen.get(timeout=WAIT) == ["x", "y"]
    b.delete("/kids/x")
    assert seen.get(timeout=WAIT) == ["y"]
    b.set("/kids/y", b"data changes are no child event")
    b.create("/kids/z")
    assert seen.get(timeout=WAIT) == ["y", "z"]


def test_data_watch_reports_creation_changes_and_deletion(kazoo_factory):
    """Programmer's Guide, "ZooKeeper Watches": an exists watch on a missing
    node fires on its creation, a data watch on each change and on
    deletion; DataWatch calls back with (data, version) or None."""
    a, b = kazoo_factory(), kazoo_factory()
    seen: queue.Queue = queue.Queue()

    def record(data, stat):
        seen.put(None if stat is None else (data, stat.version))

    a.DataWatch("/watched", record)
    assert seen.get(timeout=WAIT) is None
    b.create("/watched", b"v0")
    assert seen.get(timeout=WAIT) == (b"v0", 0)
    b.set("/watched", b"v1")
    assert seen.get(timeout=WAIT) == (b"v1", 1)
    b.set("/watched", b"v2")
    assert seen.get(timeout=WAIT) == (b"v2", 2)
    b.delete("/watched")
    assert seen.get(timeout=WAIT) is None
    b.create("/watched", None)
    assert seen.get(timeout=WAIT) == (None, 0)
