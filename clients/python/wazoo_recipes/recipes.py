"""Typed handles for wazoo's built-in recipes (docs/BUILTIN_RECIPES.md),
each a few calls of `call()`. Paths are absolute and not chrooted (the
recipes' arguments name absolute paths, docs/RECIPES.md, "Chroot").

Waits take `timeout` (seconds, None: no bound) and raise CallTimeout when
it passes. A wait that would have effects after a timeout is withdrawn
(a lock's or semaphore's `release`, an election's `resign`) or kept pending
in the handle and resumed by the next call of the same method (a queue's
`take`, a double barrier's `enter`/`leave`), so no result is lost."""

from __future__ import annotations

import contextlib
from typing import Dict, List, NamedTuple, Optional

from ._call import Call, CallTimeout, call, call_async
from ._msgpack import unpackb


def _bin_arg(data) -> object:
    """Binary data as a JSON argument: a string when UTF-8, else a list of
    byte values (the recipes take either)."""
    if isinstance(data, str):
        return data
    data = bytes(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return list(data)


def _hex(value: str) -> Optional[bytes]:
    if not value.startswith("0x") or len(value) % 2:
        return None
    try:
        return bytes.fromhex(value[2:])
    except ValueError:
        return None


def _bin_result(value) -> Optional[bytes]:
    """Binary data from a result: the server writes it as a string when it
    is UTF-8, else as `0x` and hex. A `0x...` string whose bytes are valid
    UTF-8 cannot be such hex, so it is the data itself."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, list):
        return bytes(value)
    raw = _hex(value)
    if raw is not None:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    return value.encode("utf-8")


def _struct_result(value):
    """A structured result that holds binary data arrives as `0x` and the
    hex of its MessagePack encoding; anything else is the JSON value."""
    if isinstance(value, str):
        raw = _hex(value)
        if raw is not None:
            return unpackb(raw)
    return value


class _Handle:
    module = ""

    def __init__(self, client):
        self.client = client
        self._pending: Dict[tuple, Call] = {}

    def _path_args(self, **extra) -> dict:
        """{path, id (if the handle has an identifier), **extra}."""
        args = {"path": self.path, **extra}
        if getattr(self, "identifier", None) is not None:
            args["id"] = _bin_arg(self.identifier)
        return args

    def _call(self, method: str, args, timeout=None):
        return call(self.client, self.module, method, args, timeout)

    def _resumable(self, method: str, args, timeout=None):
        """A call whose pending wait is kept after a timeout and resumed by
        the next call with the same method and arguments."""
        key = (method, repr(sorted(args.items())))
        pending = self._pending.pop(key, None) or call_async(self.client, self.module, method,
                                                             args, timeout)
        try:
            return pending.result(timeout)
        except CallTimeout:
            self._pending[key] = pending
            raise

    def _withdrawing(self, method: str, args, timeout, withdraw):
        """A wait that is withdrawn (`withdraw()`) when it times out."""
        try:
            return self._call(method, args, timeout)
        except CallTimeout as e:
            e.call.cancel()
            withdraw()
            raise


class _HeldInside:
    """`with handle:` acquires, and releases on the way out."""

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


class Lock(_HeldInside, _Handle):
    """Exclusive, fair lock (ZooKeeper Recipes and Solutions, "Locks");
    kazoo's Lock and WriteLock on the same path exclude it and are excluded.
    One contender per session and path.

        with Lock(zk, "/locks/x"):
            ...
    """

    module = "lock"

    def __init__(self, client, path: str, identifier=None, creator_acl: bool = False):
        super().__init__(client)
        self.path = path
        self.identifier = identifier
        self.creator_acl = creator_acl
        self.node: Optional[str] = None

    @property
    def is_acquired(self) -> bool:
        return self.node is not None

    def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits until this session holds the lock; True. CallTimeout (the
        attempt withdrawn) if `timeout` passes first."""
        args = self._path_args()
        if self.creator_acl:
            args["creator_acl"] = True
        self.node = self._withdrawing("acquire", args, timeout, self.release)
        return True

    def release(self) -> bool:
        """Deletes this session's lock node (also withdraws a waiter)."""
        self.node = None
        return self._call("release", {"path": self.path})

    def holder(self) -> Optional[str]:
        """The holder's lock node, None if nobody holds it."""
        return self._call("holder", {"path": self.path})


class ReadWriteLock(_Handle):
    """Shared (read) and exclusive (write) lock (ZooKeeper Recipes and
    Solutions, "Shared Locks", "Revocable Shared Locks"); kazoo's ReadLock
    and WriteLock use the same nodes.

        rw = ReadWriteLock(zk, "/locks/table")
        with rw.reading():
            ...
    """

    module = "rwlock"

    def __init__(self, client, path: str, identifier=None):
        super().__init__(client)
        self.path = path
        self.identifier = identifier

    def read_acquire(self, timeout: Optional[float] = None) -> str:
        """Waits for a shared hold; this session's node."""
        return self._withdrawing("read_acquire", self._path_args(), timeout, self.release)

    def write_acquire(self, timeout: Optional[float] = None) -> str:
        """Waits for the exclusive hold; this session's node."""
        return self._withdrawing("write_acquire", self._path_args(), timeout, self.release)

    def release(self) -> int:
        """Deletes this session's read and write nodes; how many."""
        return self._call("release", {"path": self.path})

    def revoke(self, node: str) -> bool:
        """Asks the holder of `node` to release (writes "unlock" to it)."""
        return self._call("revoke", {"node": node})

    def watch_revoke(self, node: str, timeout: Optional[float] = None) -> bool:
        """Waits until `node` is asked to release (True) or is gone (False)."""
        try:
            return self._call("watch_revoke", {"node": node}, timeout)
        except CallTimeout as e:
            e.call.cancel()
            raise

    def reading(self, timeout: Optional[float] = None):
        """`with rw.reading():` holds a shared hold inside."""
        return self._holding(self.read_acquire, timeout)

    def writing(self, timeout: Optional[float] = None):
        """`with rw.writing():` holds the exclusive hold inside."""
        return self._holding(self.write_acquire, timeout)

    @contextlib.contextmanager
    def _holding(self, acquire, timeout):
        node = acquire(timeout)
        try:
            yield node
        finally:
            self.release()


class Semaphore(_HeldInside, _Handle):
    """At most `max_leases` holders, first come first served (kazoo's
    Semaphore layout; kazoo's and ours share a path).

        with Semaphore(zk, "/sem/db", 3):
            ...
    """

    module = "semaphore"

    def __init__(self, client, path: str, max_leases: int = 1, identifier=None):
        super().__init__(client)
        self.path = path
        self.max_leases = max_leases
        self.identifier = identifier
        self.lease: Optional[str] = None

    def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits for a lease; True. CallTimeout (the attempt withdrawn) if
        `timeout` passes first."""
        self.lease = self._withdrawing("acquire", self._path_args(max_leases=self.max_leases),
                                       timeout, self.release)
        return True

    def release(self) -> bool:
        """Gives the lease back (or leaves the queue of acquirers)."""
        self.lease = None
        return self._call("release", {"path": self.path})

    def holders(self) -> List[bytes]:
        """Every lease's data (the holders' identifiers)."""
        return [_bin_result(h) for h in _struct_result(self._call("holders", {"path": self.path}))]


class Queue(_Handle):
    """FIFO queue with priorities (ZooKeeper Recipes and Solutions,
    "Queues", "Priority Queues"; kazoo's Queue layout): items are taken by
    priority (0-999, lower first; default 100), then in order. Each item is
    taken exactly once; a `put` or `take` whose reply is lost with the
    connection is found again by its call's guid, not made twice."""

    module = "queue"

    def __init__(self, client, path: str):
        super().__init__(client)
        self.path = path

    def put(self, data, priority: Optional[int] = None) -> str:
        """Adds an item; its node name."""
        args = {"path": self.path, "data": _bin_arg(data)}
        if priority is None:
            return self._call("put", args)
        args["priority"] = priority
        return self._call("put_priority", args)

    def take(self, timeout: Optional[float] = None) -> bytes:
        """Removes and returns the first item, waiting while the queue is
        empty. After a CallTimeout the take stays pending: the next take()
        resumes it, so an item it got is not lost."""
        return _bin_result(self._resumable("take", {"path": self.path}, timeout))

    def __len__(self) -> int:
        return self._call("len", {"path": self.path})


class Barrier(_Handle):
    """A barrier that is up while its node exists (ZooKeeper Recipes and
    Solutions, "Barriers"; kazoo's Barrier layout)."""

    module = "barrier"

    def __init__(self, client, path: str):
        super().__init__(client)
        self.path = path

    def create(self) -> bool:
        """Puts the barrier up; False if it was up."""
        return self._call("set", {"path": self.path})

    def remove(self) -> bool:
        """Takes the barrier down; False if it was down."""
        return self._call("remove", {"path": self.path})

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the barrier is down; True."""
        try:
            self._call("wait", {"path": self.path}, timeout)
        except CallTimeout as e:
            e.call.cancel()
            raise
        return True


class DoubleBarrier(_Handle):
    """Enter together, leave together (ZooKeeper Recipes and Solutions,
    "Double Barriers"; kazoo's DoubleBarrier layout).

        with DoubleBarrier(zk, "/barriers/job", "worker-1", 3):
            ...   # all 3 are inside
    """

    module = "double_barrier"

    def __init__(self, client, path: str, name: str, count: int):
        super().__init__(client)
        self.path = path
        self.name = name
        self.count = count

    def enter(self, timeout: Optional[float] = None) -> None:
        """Waits until `count` processes have entered. After a CallTimeout
        this process stays inside and the next enter() resumes the wait."""
        self._resumable("enter", {"path": self.path, "name": self.name, "count": self.count},
                        timeout)

    def leave(self, timeout: Optional[float] = None) -> None:
        """Waits until every process has left (resumable as enter())."""
        self._resumable("leave", {"path": self.path, "name": self.name}, timeout)

    def __enter__(self):
        self.enter()
        return self

    def __exit__(self, *exc):
        self.leave()


class TwoPhaseCommit(_Handle):
    """The coordinator of a two-phase commit (ZooKeeper Recipes and
    Solutions, "Two-phased Commit"); sites use TwoPhaseSite."""

    module = "twophase"

    def __init__(self, client, tx: str):
        super().__init__(client)
        self.tx = tx

    def begin(self, sites: List[str], data=b"") -> None:
        """Creates the transaction node (with `data`) and one node per site."""
        self._call("begin", {"tx": self.tx, "sites": list(sites), "data": _bin_arg(data)})

    def decision(self, timeout: Optional[float] = None) -> str:
        """Waits for the outcome, "commit" or "abort" (the coordinator's
        wait also notices a site that died before its vote)."""
        return _decision(self, timeout)

    def abort(self) -> str:
        """Decides abort unless decided; the outcome."""
        return self._call("abort", {"tx": self.tx})

    def site(self, name: str) -> "TwoPhaseSite":
        return TwoPhaseSite(self.client, self.tx, name)


class TwoPhaseSite(_Handle):
    """A site of a two-phase commit: join, vote, learn the outcome."""

    module = "twophase"

    def __init__(self, client, tx: str, site: str):
        super().__init__(client)
        self.tx = tx
        self.site = site

    def join(self) -> bytes:
        """Joins (this session's presence node); the transaction's data."""
        return _bin_result(self._call("join", {"tx": self.tx, "site": self.site}))

    def vote(self, commit: bool) -> Optional[str]:
        """Votes; the outcome if this vote decided it (or it was decided)."""
        return self._call("vote", {"tx": self.tx, "site": self.site, "commit": bool(commit)})

    def decision(self, timeout: Optional[float] = None) -> str:
        """Waits for the outcome, "commit" or "abort"."""
        return _decision(self, timeout)


def _decision(handle, timeout):
    try:
        return handle._call("decision", {"tx": handle.tx}, timeout)
    except CallTimeout as e:
        e.call.cancel()
        raise


class Election(_Handle):
    """Leader election with acknowledgement (ZooKeeper Recipes and
    Solutions, "Leader Election"); kazoo's Election on the same path
    contends with it."""

    module = "election"

    def __init__(self, client, path: str, identifier):
        super().__init__(client)
        self.path = path
        self.identifier = identifier

    def campaign(self, timeout: Optional[float] = None) -> str:
        """Waits until this session leads; its candidate node. CallTimeout
        (the candidacy withdrawn) if `timeout` passes first."""
        return self._withdrawing("campaign", {"path": self.path, "id": _bin_arg(self.identifier)},
                                 timeout, self.resign)

    def leader(self) -> Optional[bytes]:
        """The leader's identifier, None without candidates."""
        return _bin_result(self._call("leader", {"path": self.path}))

    def resign(self) -> bool:
        """Withdraws this session's candidacy (or leadership)."""
        return self._call("resign", {"path": self.path})

    def ack(self) -> None:
        """The leader acknowledges that it leads (APIError unless it does)."""
        self._call("ack", {"path": self.path})

    def wait_ack(self, timeout: Optional[float] = None) -> bytes:
        """Waits until the current leader acknowledged; its identifier."""
        try:
            return _bin_result(self._call("wait_ack", {"path": self.path}, timeout))
        except CallTimeout as e:
            e.call.cancel()
            raise


class Members(NamedTuple):
    """A group's members (name -> data) and the group node's cversion
    (-1 without a group node)."""

    version: int
    members: Dict[str, bytes]


def _members(value) -> Members:
    value = _struct_result(value)
    return Members(value["version"],
                   {m["name"]: _bin_result(m.get("data")) for m in value["members"]})


class Group(_Handle):
    """Group membership (ZooKeeper Recipes and Solutions, "Out of the Box
    Applications", Group Membership): members are ephemeral nodes."""

    module = "group"

    def __init__(self, client, path: str):
        super().__init__(client)
        self.path = path

    def join(self, member: str, data=b"") -> None:
        """Joins as `member` (updates its data if this session is it)."""
        self._call("join", {"path": self.path, "member": member, "data": _bin_arg(data)})

    def leave(self, member: str) -> bool:
        return self._call("leave", {"path": self.path, "member": member})

    def members(self) -> Members:
        return _members(self._call("members", {"path": self.path}))

    def watch(self, version: int, timeout: Optional[float] = None) -> Members:
        """Waits until the membership's version differs from `version`."""
        try:
            return _members(self._call("watch_members", {"path": self.path, "version": version},
                                       timeout))
        except CallTimeout as e:
            e.call.cancel()
            raise
