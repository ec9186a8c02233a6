"""The Python helper package clients/python (`wazoo_recipes`) on stock
kazoo: the generic call and a typed handle for each built-in recipe
(docs/BUILTIN_RECIPES.md), which call recipes through ZooKeeper's standard
operations only (docs/RECIPES.md, "Calling from any client").

Runs on wazoo only (Apache ZooKeeper runs no recipes), standalone and on
the shared 3-member ensemble (each client on a member of its own, every
client chrooted: the call nodes are made under the chroot, the recipes'
arguments are absolute paths); and one test on an ensemble of its own whose
leader is killed while a caller waits. Every wait is bounded.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from kazoo.exceptions import BadArgumentsError, NoNodeError, NotReadOnlyCallError

from conftest import connect, serve_with_recipes, wait_for_recipes
from servers import TARGETS, WAIT, start_ensemble

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from wazoo_recipes import (  # noqa: E402
    Barrier,
    CallTimeout,
    DoubleBarrier,
    Election,
    Group,
    Lock,
    Queue,
    ReadWriteLock,
    Semaphore,
    TwoPhaseCommit,
    TwoPhaseSite,
    call,
    call_async,
    query,
)

BUILTINS_USED = ("lock", "rwlock", "semaphore", "queue", "barrier", "double_barrier",
                 "twophase", "election", "group")
# A wait a test expects to time out.
SHORT = 0.5


@pytest.fixture(params=[t for t in TARGETS if t.startswith("wazoo")])
def server(request):
    yield from serve_with_recipes(request, request.param, BUILTINS_USED)


def unique(kind: str) -> str:
    return f"/{kind}/{uuid.uuid4().hex}"


class Background:
    """Runs `fn` in a thread; `.result()` waits (bounded) for its value."""

    def __init__(self, fn, *args, **kwargs):
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn, args, kwargs):
        try:
            self._value = fn(*args, **kwargs)
        except BaseException as e:  # handed to result()
            self._error = e

    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self, timeout: float = WAIT):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"still waiting after {timeout} s"
        if self._error is not None:
            raise self._error
        return self._value


def calls_left(client, module: str) -> list[str]:
    try:
        return client.get_children(f"/zookeeper/calls/{module}")
    except NoNodeError:
        return []


# -- the generic call ---------------------------------------------------------------------


def test_call_returns_the_value_and_deletes_its_call_node(kazoo_factory):
    client = kazoo_factory()
    lock = unique("locks")
    node = call(client, "lock", "acquire", {"path": lock}, timeout=WAIT)
    assert node.startswith(f"{lock}/") and "__lock__" in node
    assert call(client, "lock", "holder", {"path": lock}, timeout=WAIT) == node
    assert calls_left(client, "lock") == [], "the caller deletes each call node after reading it"


def test_query_reads_with_a_get_and_refuses_a_method_that_writes(kazoo_factory):
    client = kazoo_factory()
    lock = unique("locks")
    node = call(client, "lock", "acquire", {"path": lock}, timeout=WAIT)
    assert query(client, "lock", "holder", {"path": lock}) == node
    # (Its holder's acquire of `lock` would change nothing: a fresh lock.)
    with pytest.raises(NotReadOnlyCallError):
        query(client, "lock", "acquire", {"path": unique("locks")})
    assert calls_left(client, "lock") == [], "a query makes no call node"


def test_a_call_that_fails_at_once_raises_the_kazoo_exception_of_its_code(kazoo_factory):
    client = kazoo_factory()
    with pytest.raises(BadArgumentsError):
        call(client, "lock", "acquire", {"path": "relative"}, timeout=WAIT)


def test_a_wait_that_ends_in_an_error_raises_it_with_the_recipes_message(kazoo_factory):
    """docs/BUILTIN_RECIPES.md, lock: a waiter that calls release withdraws;
    its pending wait then ends with a NoNode error when its predecessor goes."""
    holder, waiter = kazoo_factory(), kazoo_factory()
    lock = unique("locks")
    Lock(holder, lock).acquire(timeout=WAIT)
    pending = call_async(waiter, "lock", "acquire", {"path": lock})
    with pytest.raises(CallTimeout):
        pending.result(timeout=SHORT)
    assert not pending.done()
    assert call(waiter, "lock", "release", {"path": lock}, timeout=WAIT) is True
    Lock(holder, lock).release()
    with pytest.raises(NoNodeError) as failed:
        pending.result(timeout=WAIT)
    assert failed.value.code == NoNodeError.code and str(failed.value)
    assert calls_left(waiter, "lock") == []


# -- the typed handles --------------------------------------------------------------------


def test_lock_waiter_acquires_once_the_holder_releases(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Locks."""
    holder, waiter = kazoo_factory(), kazoo_factory()
    path = unique("locks")
    with Lock(holder, path, identifier=b"holder") as held:
        assert held.is_acquired
        waiting = Background(Lock(waiter, path).acquire, timeout=WAIT)
        time.sleep(SHORT)
        assert waiting.running(), "the waiter does not get a held lock"
        assert Lock(waiter, path).holder() == held.node
    assert waiting.result() is True
    assert Lock(holder, path).holder().startswith(f"{path}/")


def test_lock_acquire_that_times_out_withdraws(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Locks (unlock: delete the node)."""
    holder, waiter = kazoo_factory(), kazoo_factory()
    path = unique("locks")
    held = Lock(holder, path)
    held.acquire(timeout=WAIT)
    with pytest.raises(CallTimeout):
        Lock(waiter, path).acquire(timeout=SHORT)
    held.release()
    assert Lock(holder, path).holder() is None, "the timed-out waiter left no node"


def test_rwlock_readers_share_and_a_writer_waits_for_them(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Shared Locks."""
    r1, r2, w = kazoo_factory(), kazoo_factory(), kazoo_factory()
    path = unique("rwlocks")
    with ReadWriteLock(r1, path).reading(timeout=WAIT) as node1:
        with ReadWriteLock(r2, path).reading(timeout=WAIT) as node2:
            assert "__rlock__" in node1 and "__rlock__" in node2
            writer = Background(ReadWriteLock(w, path).write_acquire, timeout=WAIT)
            time.sleep(SHORT)
            assert writer.running(), "a writer waits for the readers"
    assert "__lock__" in writer.result()
    assert ReadWriteLock(w, path).release() == 1


def test_rwlock_revoke_reaches_the_holders_watch(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Revocable Shared Locks."""
    holder, revoker = kazoo_factory(), kazoo_factory()
    path = unique("rwlocks")
    rw = ReadWriteLock(holder, path)
    node = rw.write_acquire(timeout=WAIT)
    watching = Background(rw.watch_revoke, node, timeout=WAIT)
    time.sleep(SHORT)
    assert ReadWriteLock(revoker, path).revoke(node) is True
    assert watching.result() is True
    assert rw.release() == 1


def test_semaphore_admits_max_leases_holders(kazoo_factory):
    """kazoo's Semaphore design (docs/BUILTIN_RECIPES.md, semaphore)."""
    a, b, c = kazoo_factory(), kazoo_factory(), kazoo_factory()
    path = unique("semaphores")
    with Semaphore(a, path, 2, identifier=b"a"), Semaphore(b, path, 2, identifier=b"b\xff"):
        assert sorted(Semaphore(c, path, 2).holders()) == [b"a", b"b\xff"]
        # A session that withdrew a waiting acquire (release) acquires
        # again, while a holder leaves: its new call is answered (its wait,
        # registered again while the holder's delete was in flight, was
        # once called back as the withdrawn call's, on the ensemble).
        with pytest.raises(CallTimeout):
            Semaphore(c, path, 2).acquire(timeout=SHORT)
        third = Background(Semaphore(c, path, 2, identifier=b"c").acquire, timeout=WAIT)
    assert third.result() is True
    assert Semaphore(c, path, 2).holders() == [b"c"]


def test_queue_takes_by_priority_then_order_and_take_waits(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Queues and Priority Queues."""
    producer, consumer = kazoo_factory(), kazoo_factory()
    path = unique("queues")
    q = Queue(producer, path)
    q.put(b"second")
    q.put(b"\xff binary")
    q.put(b"first", priority=5)
    assert len(q) == 3
    mine = Queue(consumer, path)
    assert [mine.take(timeout=WAIT) for _ in range(3)] == [b"first", b"second", b"\xff binary"]
    with pytest.raises(CallTimeout):
        mine.take(timeout=SHORT)
    q.put(b"late")
    assert mine.take(timeout=WAIT) == b"late", "the pending take is resumed, its item not lost"
    assert len(q) == 0


def test_barrier_wait_returns_once_removed(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Barriers."""
    owner, waiter = kazoo_factory(), kazoo_factory()
    path = unique("barriers")
    barrier = Barrier(owner, path)
    assert barrier.create() is True
    waiting = Background(Barrier(waiter, path).wait, timeout=WAIT)
    time.sleep(SHORT)
    assert waiting.running()
    assert barrier.remove() is True
    assert waiting.result() is True
    assert Barrier(waiter, path).wait(timeout=WAIT) is True, "a barrier that is down passes"


def test_double_barrier_enters_and_leaves_together(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Double Barriers."""
    a, b = kazoo_factory(), kazoo_factory()
    path = unique("double-barriers")
    first = DoubleBarrier(a, path, "a", 2)
    with pytest.raises(CallTimeout):
        first.enter(timeout=SHORT)
    entering = Background(first.enter, timeout=WAIT)
    with DoubleBarrier(b, path, "b", 2):
        entering.result()
        leaving = Background(first.leave, timeout=WAIT)
    leaving.result()


def test_twophase_commits_when_every_site_votes_commit(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Two-phased Commit."""
    coordinator, s1, s2 = kazoo_factory(), kazoo_factory(), kazoo_factory()
    tx = unique("tx")
    tpc = TwoPhaseCommit(coordinator, tx)
    tpc.begin(["a", "b"], data=b"the transaction")
    outcome = Background(tpc.decision, timeout=WAIT)
    site_a, site_b = TwoPhaseSite(s1, tx, "a"), TwoPhaseSite(s2, tx, "b")
    assert site_a.join() == b"the transaction"
    assert site_b.join() == b"the transaction"
    assert site_a.vote(True) is None
    assert site_b.vote(True) == "commit"
    assert outcome.result() == "commit"
    assert site_a.decision(timeout=WAIT) == "commit"


def test_twophase_one_abort_vote_aborts(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Two-phased Commit."""
    coordinator, site = kazoo_factory(), kazoo_factory()
    tx = unique("tx")
    TwoPhaseCommit(coordinator, tx).begin(["a", "b"])
    a = TwoPhaseSite(site, tx, "a")
    a.join()
    assert a.vote(False) == "abort"
    assert TwoPhaseCommit(coordinator, tx).decision(timeout=WAIT) == "abort"


def test_election_next_candidate_leads_after_resign_and_ack_is_seen(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Leader Election."""
    c1, c2 = kazoo_factory(), kazoo_factory()
    path = unique("elections")
    first, second = Election(c1, path, b"one"), Election(c2, path, b"two")
    assert first.campaign(timeout=WAIT).startswith(f"{path}/")
    acked = Background(second.wait_ack, timeout=WAIT)
    campaigning = Background(second.campaign, timeout=WAIT)
    time.sleep(SHORT)
    assert campaigning.running(), "one leader at a time"
    assert second.leader() == b"one"
    first.ack()
    assert acked.result() == b"one"
    assert first.resign() is True
    assert campaigning.result().startswith(f"{path}/")
    assert first.leader() == b"two"


def test_group_members_and_watch_for_a_change(kazoo_factory):
    """ZooKeeper Recipes and Solutions, Out of the Box Applications: Group Membership."""
    a, b = kazoo_factory(), kazoo_factory()
    path = unique("groups")
    group = Group(a, path)
    group.join("alpha", b"\x00\xff")
    seen = group.members()
    assert seen.members == {"alpha": b"\x00\xff"}
    changed = Background(group.watch, seen.version, timeout=WAIT)
    time.sleep(SHORT)
    Group(b, path).join("beta", b"hello")
    now = changed.result()
    assert now.members == {"alpha": b"\x00\xff", "beta": b"hello"}
    assert now.version != seen.version
    assert Group(b, path).leave("beta") is True


# -- failover -----------------------------------------------------------------------------


def test_lock_waiter_gets_the_lock_after_the_leader_is_killed_mid_wait():
    """A waiting call survives the leader's death (docs/RECIPES.md, "Calling
    from any client", Failover; ZooKeeper Recipes and Solutions, Locks):
    the waiter's session is on the leader, so it moves to another member,
    where kazoo sets its getData watch again; the new leader runs the wait's
    callback once the holder (on a follower) releases. An ensemble of its
    own, so the shared one stays undisturbed."""
    ensemble = start_ensemble("wazoo-ensemble")
    clients = []
    try:
        wait_for_recipes(ensemble.members, BUILTINS_USED)
        leader = ensemble.leader()
        follower = (leader + 1) % len(ensemble.members)
        holder = connect(ensemble.connect_string(follower), randomize_hosts=False)
        waiter = connect(ensemble.connect_string(leader), randomize_hosts=False)
        clients += [holder, waiter]
        path = unique("locks")
        held = Lock(holder, path)
        held.acquire(timeout=WAIT)
        waiting = Background(Lock(waiter, path, identifier=b"waiter").acquire, timeout=120)
        time.sleep(SHORT)
        assert waiting.running()

        ensemble.kill(leader)
        deadline = time.monotonic() + 60
        while ensemble.leader() in (None, leader):
            assert time.monotonic() < deadline, f"no new leader within 60 s: {ensemble.modes()}"
            time.sleep(0.1)
        assert waiting.running(), "the waiter still waits: the lock is held"

        assert Background(held.release).result(60) is True
        assert waiting.result(120) is True
        assert Lock(holder, path).holder().startswith(f"{path}/")
    finally:
        for c in clients:
            c.stop()
            c.close()
        ensemble.close()
