"""Recipe calls through ZooKeeper's standard operations (docs/RECIPES.md,
"Calling from any client"): an ephemeral create under
/zookeeper/calls/<module>/ whose data is the JSON arguments; the created
node holds the result as JSON, and a call that waits ends by setting that
node's data, which fires a getData watch. A call that changes nothing may
be made by a getData instead (`query`, "Calls that change nothing")."""

from __future__ import annotations

import json
import threading
import time
import uuid

from kazoo.exceptions import (
    EXCEPTIONS,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.protocol.states import EventType, KazooState

CALLS_ROOT = "/zookeeper/calls"

# How long one step (a create, a read, a delete) waits for a lost connection
# to come back when the call itself has no timeout.
_RECONNECT_SLICE = 1.0


class CallTimeout(KazooException, TimeoutError):
    """The call's result was not final within the timeout. `.call` is the
    still pending Call: `exc.call.result()` waits on, `exc.call.cancel()`
    drops its node (the recipe's wait itself is not withdrawn)."""

    def __init__(self, message: str, call: "Call | None" = None):
        super().__init__(message)
        self.call = call


def recipe_error(code: int, message: str) -> ZookeeperError:
    """The kazoo exception for a ZooKeeper error code (NoNodeError for -101,
    ...), carrying the recipe's message; `.code` is the code."""
    try:
        cls = EXCEPTIONS[code]
    except RuntimeError:  # a code kazoo does not know
        exc = ZookeeperError(f"{message} (code {code})")
        exc.code = code
        return exc
    exc = cls(message)
    exc.code = code  # kazoo's classes carry it too; also for those that do not
    return exc


class Call:
    """One recipe call: made by `start()` (call_async does it), its final
    result read by `result()`. Its node is named with Curator's protected
    prefix `_c_<uuid>-<method>`, so a create whose reply was lost is found
    again instead of being made twice, and the uuid is the call's guid."""

    def __init__(self, client, module: str, method: str, args=None):
        if not module or "/" in module or not method or "/" in method:
            raise ValueError("module and method are single path components")
        self.client = client
        self.module = module
        self.method = method
        self.args = args
        self.guid = str(uuid.uuid4())
        self.path: str | None = None
        self._changed = threading.Event()
        self._final = None  # ("done", value) or ("error", exc)
        self._lock = threading.Lock()

    # -- making the call -----------------------------------------------------------

    def start(self, timeout: float | None = None) -> "Call":
        """Creates the call node (once). Raises the recipe's error (a kazoo
        exception) if the call fails at once."""
        if self.path is not None:
            return self
        data = b"" if self.args is None else json.dumps(self.args).encode()
        parent = f"{CALLS_ROOT}/{self.module}"
        prefix = f"_c_{self.guid}-"
        deadline = None if timeout is None else time.monotonic() + timeout
        self.client.add_listener(self._on_state)
        try:
            while True:
                try:
                    self.path = self.client.create(f"{parent}/{prefix}{self.method}", data,
                                                   ephemeral=True, sequence=True)
                    return self
                except (ConnectionLoss, OperationTimeoutError):
                    pass  # was it made? Look for our guid once connected again.
                while True:
                    self._pause(deadline, "the call's create")
                    try:
                        children = self.client.get_children(parent)
                    except NoNodeError:
                        children = []
                    except (ConnectionLoss, OperationTimeoutError):
                        continue
                    break
                mine = sorted(c for c in children if c.startswith(prefix))
                if mine:
                    self.path = f"{parent}/{mine[0]}"
                    return self
        except BaseException:
            self.client.remove_listener(self._on_state)
            raise

    # -- its result ----------------------------------------------------------------

    def poll(self) -> dict:
        """Reads the call node once, re-arming the getData watch: its result
        as JSON ({"done": V}, {"waiting": T} or {"error": {...}})."""
        data, _ = self.client.get(self.path, watch=self._on_watch)
        return json.loads(data)

    def done(self) -> bool:
        """Whether the result is final (reads the node unless known)."""
        if self._final is None:
            self._settle(self.poll())
        return self._final is not None

    def result(self, timeout: float | None = None):
        """The call's value once final, the recipe's error raised as the
        kazoo exception of its code, or CallTimeout. Deletes the call node
        after reading a final result."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._final is None:
            self._changed.clear()
            try:
                self._settle(self.poll())
            except (ConnectionLoss, OperationTimeoutError):
                pass  # the state listener wakes us when connected again
            except SessionExpiredError as e:
                self._finish(("error", e))
                break
            except NoNodeError:
                self._finish(("error", SessionExpiredError(
                    f"the call node {self.path} is gone: its session ended or it was deleted")))
                break
            if self._final is not None:
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise CallTimeout(f"{self.module}.{self.method} still waiting after {timeout} s "
                                  f"(call node {self.path})", self)
            # The watch fires on the data change; kazoo sets it again after a
            # reconnect, and the listener wakes us then to read again anyway.
            self._changed.wait(remaining)
        kind, value = self._final
        if kind == "error":
            raise value
        return value

    def cancel(self) -> None:
        """Deletes the call node (a final result in it is lost). The
        recipe's wait is not withdrawn: use the recipe's own method (a
        lock's release, ...) for that."""
        self._finish(None)
        self._delete()

    # -- internals -----------------------------------------------------------------

    def _settle(self, result: dict) -> None:
        if "done" in result:
            self._finish(("done", result["done"]))
        elif "error" in result:
            err = result["error"]
            self._finish(("error", recipe_error(int(err.get("code", -1)), err.get("message", ""))))

    def _finish(self, final) -> None:
        with self._lock:
            if self._final is not None:
                return
            self._final = final
        self.client.remove_listener(self._on_state)
        if final is not None:
            self._delete()

    def _delete(self) -> None:
        try:
            self.client.retry(self.client.delete, self.path)
        except (NoNodeError, SessionExpiredError):
            pass
        except KazooException:
            pass  # it goes with the session anyway

    def _pause(self, deadline, what: str) -> None:
        """Waits until the connection is back (bounded by deadline)."""
        while not self.client.connected:
            if self.client.state == KazooState.LOST:
                raise SessionExpiredError(f"the session ended during {what}")
            remaining = _RECONNECT_SLICE if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise CallTimeout(f"{what}: not connected within the timeout", self)
            self._changed.clear()
            self._changed.wait(min(remaining, _RECONNECT_SLICE))

    def _on_watch(self, event) -> None:
        self._changed.set()

    def _on_state(self, state) -> None:
        self._changed.set()
        return False  # stay registered

    def __repr__(self) -> str:
        return f"<Call {self.module}.{self.method} {self.path or 'not started'}>"


def call_async(client, module: str, method: str, args=None, timeout: float | None = None) -> Call:
    """Makes the call and returns its Call without waiting for a final
    result: `.result(timeout)`, `.done()`, `.cancel()`."""
    return Call(client, module, method, args).start(timeout)


def call(client, module: str, method: str, args=None, timeout: float | None = None):
    """Calls `module.method(args)` and waits (at most `timeout` seconds if
    given) until its result is final; returns the recipe's value (JSON:
    binary data as a string, see the typed handles), or raises the recipe's
    error as the kazoo exception of its code, or CallTimeout (whose `.call`
    is still pending)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pending = call_async(client, module, method, args, timeout)
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    return pending.result(remaining)


def query_path(module: str, method: str, args=None) -> str:
    """The path whose getData makes the read call `module.method(args)`:
    /zookeeper/calls/<module>/<method>/<JSON>, every `/` of the JSON
    written `\\/` (JSON's own escape: `/` only occurs inside its strings),
    so that no name of the path is empty or `.`."""
    text = json.dumps(args, separators=(",", ":"), ensure_ascii=False).replace("/", "\\/")
    return f"{CALLS_ROOT}/{module}/{method}/{text}"


def query(client, module: str, method: str, args=None):
    """Calls `module.method(args)`, a method that changes nothing, with one
    getData (docs/RECIPES.md, "Calls that change nothing"): it runs as a
    read on the member the session is on, against what that member has
    committed (call `client.sync("/")` first for the latest state), makes no
    node and logs nothing. Returns the recipe's value as `call` does, or
    raises the recipe's error as the kazoo exception of its code; a method
    that writes or waits raises NotReadOnlyCallError (call it with `call`)."""
    data, _ = client.get(query_path(module, method, args))
    return json.loads(data)["done"]
