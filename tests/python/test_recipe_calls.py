"""Recipe calls from a stock kazoo client, through ZooKeeper's standard
operations only (docs/RECIPES.md, "Calling from any client"): a call is an
ephemeral sequential create under /zookeeper/calls/<module>/<method> with
JSON arguments as the node's data; the created node holds the result as
JSON, and a call that waits finishes by changing that data, which fires the
caller's getData watch (ZooKeeper Programmer's Guide, "ZooKeeper Watches").

Runs on wazoo only (Apache ZooKeeper runs no recipes), standalone and on a
3-member ensemble, where each client is on a member of its own (a call made
on a follower is forwarded to the leader, and its node's data changes on
the follower that holds the session) and every client has a chroot (the
call node is made under it; the recipe's arguments are absolute paths).
"""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from kazoo.exceptions import (
    BadArgumentsError,
    NoAuthError,
    NotReadOnlyCallError,
    UnimplementedError,
)

from conftest import serve_with_recipes
from servers import TARGETS, WAIT


BUILTINS_USED = ("lock",)


@pytest.fixture(params=[t for t in TARGETS if t.startswith("wazoo")])
def server(request):
    yield from serve_with_recipes(request, request.param, BUILTINS_USED)


def call(client, module: str, method: str, args) -> tuple[str, dict]:
    """Makes the call; its node's path and result."""
    path = client.create(f"/zookeeper/calls/{module}/{method}", json.dumps(args).encode(),
                         ephemeral=True, sequence=True)
    data, _ = client.get(path)
    return path, json.loads(data)


def test_a_call_answers_at_once_in_its_node(kazoo_factory):
    client = kazoo_factory()
    lock = f"/locks/{uuid.uuid4().hex}"
    path, result = call(client, "lock", "acquire", {"path": lock})
    assert path.startswith("/zookeeper/calls/lock/acquire"), path
    assert result["done"].startswith(f"{lock}/"), result
    stat = client.exists(path)
    assert stat.ephemeralOwner == client.client_id[0], "the caller's node"
    # The caller deletes it once read (or it goes with the session).
    client.delete(path)
    _, released = call(client, "lock", "release", {"path": lock})
    assert released == {"done": True}


def test_a_waiting_call_finishes_by_changing_its_nodes_data(kazoo_factory):
    holder, waiter = kazoo_factory(), kazoo_factory()
    lock = f"/locks/{uuid.uuid4().hex}"
    _, held = call(holder, "lock", "acquire", {"path": lock})
    assert "done" in held, held
    path = waiter.create("/zookeeper/calls/lock/acquire", json.dumps({"path": lock}).encode(),
                         ephemeral=True, sequence=True)
    changed = threading.Event()
    data, _ = waiter.get(path, watch=lambda event: changed.set())
    assert json.loads(data) == {"waiting": f"acquire:{lock}"}
    _, released = call(holder, "lock", "release", {"path": lock})
    assert released == {"done": True}
    assert changed.wait(WAIT), "the waiter's getData watch fired"
    data, stat = waiter.get(path)
    result = json.loads(data)
    assert result["done"].startswith(f"{lock}/"), result
    assert stat.version == 1


def test_a_failed_call_fails_its_create_and_leaves_nothing(kazoo_factory):
    client = kazoo_factory()
    with pytest.raises(BadArgumentsError):
        call(client, "lock", "acquire", {"path": "relative"})
    with pytest.raises(BadArgumentsError):
        client.create("/zookeeper/calls/lock/acquire", b"{}", sequence=True)  # not ephemeral
    assert not client.exists("/zookeeper/calls/lock") or client.get_children(
        "/zookeeper/calls/lock") == []


def test_only_the_caller_deletes_its_call_node(kazoo_factory):
    caller, other = kazoo_factory(), kazoo_factory()
    path, _ = call(caller, "lock", "holder", {"path": f"/locks/{uuid.uuid4().hex}"})
    other.sync(path)
    with pytest.raises(NoAuthError):
        other.delete(path)
    with pytest.raises(NoAuthError):
        caller.set(path, b"forged")
    caller.delete(path)
    assert caller.exists(path) is None


def read_call_path(module: str, method: str, args) -> str:
    """The getData path of a read call: a `/` of the JSON written `\\/`."""
    return f"/zookeeper/calls/{module}/{method}/" + json.dumps(args).replace("/", "\\/")


# docs/RECIPES.md, "Calls that change nothing": the result is the get's
# data, read on the member the session is on (after a sync, the latest
# state, as for any read: ZooKeeper Programmer's Guide, "Consistency
# Guarantees"); a method that writes is refused with NotReadOnly and
# nothing of it applies.
def test_a_method_that_changes_nothing_is_called_by_a_get(kazoo_factory):
    holder, other = kazoo_factory(), kazoo_factory()
    lock = f"/locks/{uuid.uuid4().hex}"
    _, held = call(holder, "lock", "acquire", {"path": lock})
    data, _ = holder.get(read_call_path("lock", "holder", {"path": lock}))
    assert json.loads(data) == held
    # Another session, maybe on another member: sync, then read.
    other.sync("/")
    data, _ = other.get(read_call_path("lock", "holder", {"path": lock}))
    assert json.loads(data) == held
    # Unescaped slashes are a path's separators, and the arguments still.
    data, _ = other.get(f'/zookeeper/calls/lock/holder/{{"path":"{lock}"}}')
    assert json.loads(data) == held
    with pytest.raises(NotReadOnlyCallError):
        other.get(read_call_path("lock", "acquire", {"path": lock}))
    # Had the refused acquire applied, `other` would hold the lock now.
    _, released = call(holder, "lock", "release", {"path": lock})
    assert released == {"done": True}
    other.sync("/")
    data, _ = other.get(read_call_path("lock", "holder", {"path": lock}))
    assert json.loads(data) == {"done": None}, "the refused acquire left nothing"
    with pytest.raises(BadArgumentsError):
        other.get("/zookeeper/calls/lock/holder/{not json")
    with pytest.raises(UnimplementedError):
        other.get(read_call_path("lock", "nope", None))
    # No call node: the gets made none.
    made = holder.get_children("/zookeeper/calls/lock")
    assert [c for c in made if c.startswith("holder")] == [], made
