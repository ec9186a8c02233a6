"""Call wazoo's server-side recipes from stock kazoo (docs/RECIPES.md,
"Calling from any client"; the built-in recipes: docs/BUILTIN_RECIPES.md).

    from kazoo.client import KazooClient
    from wazoo_recipes import Lock, call

    zk = KazooClient("127.0.0.1:2181"); zk.start()
    with Lock(zk, "/locks/x"):
        ...
    call(zk, "lock", "holder", {"path": "/locks/x"})
    query(zk, "lock", "holder", {"path": "/locks/x"})   # a getData: changes nothing
"""

from ._call import (
    CALLS_ROOT,
    Call,
    CallTimeout,
    call,
    call_async,
    query,
    query_path,
    recipe_error,
)
from .recipes import (
    Barrier,
    DoubleBarrier,
    Election,
    Group,
    Lock,
    Members,
    Queue,
    ReadWriteLock,
    Semaphore,
    TwoPhaseCommit,
    TwoPhaseSite,
)

__all__ = [
    "CALLS_ROOT", "Call", "CallTimeout", "call", "call_async", "query", "query_path",
    "recipe_error",
    "Barrier", "DoubleBarrier", "Election", "Group", "Lock", "Members", "Queue",
    "ReadWriteLock", "Semaphore", "TwoPhaseCommit", "TwoPhaseSite",
]
__version__ = "0.1.0"
