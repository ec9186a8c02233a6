"""Fixtures shared by the Python compatibility tests.

`server` starts a fresh server for each test, once per flavor:
test_x[zookeeper] runs against Apache ZooKeeper 3.8 (the oracle),
test_x[wazoo] against this project's server. Select one with
`-k zookeeper` or `-k wazoo`. A wazoo binary that is missing or does not
come up makes the wazoo tests fail, never skip.
"""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from servers import FLAVORS, WAIT, ServerStartError, start_server


@pytest.fixture(params=FLAVORS)
def server(request):
    """A fresh standalone server on a free loopback port; `.hosts` is its
    connect string. Killed (and its directory removed) at teardown."""
    try:
        srv = start_server(request.param)
    except ServerStartError as e:
        failure = str(e)
    else:
        failure = None
    if failure is not None:  # outside `except`, so the report shows no chained traceback
        pytest.fail(f"the {request.param} server did not start: {failure}", pytrace=False)
    yield srv
    srv.close()


def connect(hosts: str, **kwargs) -> KazooClient:
    """A started KazooClient, or a failure naming the server, within WAIT seconds."""
    kwargs.setdefault("timeout", 10.0)
    client = KazooClient(hosts=hosts, **kwargs)
    try:
        client.start(timeout=WAIT)
    except Exception as e:  # kazoo raises its handler's timeout exception
        failure = repr(e)
    else:
        return client
    client.stop()
    client.close()
    pytest.fail(f"kazoo could not connect to {hosts} within {WAIT}s: {failure}", pytrace=False)


@pytest.fixture
def kazoo_factory(server):
    """Call it to get more connected clients (each its own session), e.g.
    `kazoo_factory(auth_data=[("digest", "user:pw")])`. All are closed at teardown."""
    clients = []

    def make(**kwargs) -> KazooClient:
        client = connect(server.hosts, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.stop()
        client.close()


@pytest.fixture
def kazoo_client(kazoo_factory) -> KazooClient:
    """A connected KazooClient on `server`."""
    return kazoo_factory()
