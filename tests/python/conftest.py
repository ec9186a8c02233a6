"""Fixtures shared by the Python compatibility tests.

`server` runs each test once per target (servers.TARGETS):

- test_x[zookeeper]: a fresh standalone Apache ZooKeeper 3.8 (the oracle),
- test_x[wazoo]: a fresh standalone wazoo,
- test_x[zookeeper-ensemble]: a 3-member Apache ZooKeeper 3.8 ensemble,
- test_x[wazoo-ensemble]: a 3-member wazoo ensemble.

Select with `-k`: `-k zookeeper` (both ZooKeeper targets), `-k wazoo`,
`-k ensemble`, `-k "not ensemble"`, `-k "wazoo and not ensemble"`, ...

Standalone servers are started per test. Each ensemble is started once per
pytest session (the first test that needs it pays the start-up) and shared:
every test gets its own empty chroot `/kazoo-tests/<n>-<test>` (created by
an admin session before the test, deleted with everything under it after
it), so tests keep using absolute paths such as "/node" without colliding.
A server or ensemble that is missing or does not come up makes its tests
fail, never skip; so does an ensemble member that died during a test.

Every shared server runs with SHARED_CFG (reconfig enabled, the super user
super:test). A module whose tests need no fresh standalone server overrides
`server` with serve_shared_target: its standalone targets are shared too
(one server per flavor for the session, a chroot per test).

`standalone_server` is the same without the ensemble targets, for tests
that depend on standalone behaviour (test_golden_replay.py: zxid numbering
of a fresh server, one connection to one port).
"""

from __future__ import annotations

import itertools
import re
import time
import warnings

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError, NotEmptyError

from servers import (
    ENSEMBLE_FLAVORS,
    FLAVORS,
    TARGETS,
    WAIT,
    Ensemble,
    ServerStartError,
    start_ensemble,
    start_server,
)

# Parent of every test's chroot on a shared ensemble.
ENSEMBLE_TEST_ROOT = "/kazoo-tests"

# The super user's digest (super:test, as in the Rust tests). ZooKeeper reads
# an unknown zoo.cfg key as the system property "zookeeper.<key>", so one
# line serves both servers.
SUPER_DIGEST = "DigestAuthenticationProvider.superDigest=super:D/InIHSb7yEEbrWz8b9l71RjZJU="
# What every shared server (ensemble or standalone) runs with: a super user
# and reconfig enabled, for the tests of their refusals
# (test_super_user_kazoo.py). No test reconfigures a shared server.
SHARED_CFG = ["reconfigEnabled=true", SUPER_DIGEST]


def _start_standalone(flavor: str, extra_cfg=()):
    try:
        srv = start_server(flavor, extra_cfg=list(extra_cfg))
    except ServerStartError as e:
        failure = str(e)
    else:
        failure = None
    if failure is not None:  # outside `except`, so the report shows no chained traceback
        pytest.fail(f"the {flavor} server did not start: {failure}", pytrace=False)
    return srv


@pytest.fixture(params=FLAVORS)
def standalone_server(request):
    """A fresh standalone server on a free loopback port; `.hosts` is its
    connect string, `.host`/`.port` its address. Killed (and its directory
    removed) at teardown."""
    srv = _start_standalone(request.param)
    yield srv
    srv.close()


class EnsembleTarget:
    """What `server` is on an ensemble target: one test's view of a shared
    ensemble, rooted at its own chroot.

    `.hosts` is the full connect string, every member followed by the chroot
    (`127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3/kazoo-tests/0007-test_x`), so a
    KazooClient(hosts=server.hosts) sees an empty tree of its own.
    `.ensemble` is the servers.Ensemble (member ports, modes, logs)."""

    def __init__(self, ensemble: Ensemble, chroot: str, first_member: int):
        self.ensemble = ensemble
        self.chroot = chroot
        self.first_member = first_member

    @property
    def flavor(self) -> str:
        return self.ensemble.flavor

    @property
    def is_ensemble(self) -> bool:
        """False for a shared standalone server (SharedStandalone)."""
        return len(self.ensemble.members) > 1

    @property
    def hosts(self) -> str:
        return self.client_hosts(0)

    def client_hosts(self, k: int) -> str:
        """The connect string for the test's k-th client (k = 0, 1, ...):
        every member, starting at member first_member + k. kazoo_factory
        connects without shuffling, so a test's clients land on different
        members (a test with three clients has one on each), and which
        member that is stays the same from run to run."""
        return self.ensemble.connect_string(self.first_member + k, self.chroot)

    def __repr__(self) -> str:
        return f"<{self.flavor} {self.hosts}>"


class SharedEnsemble:
    """One ensemble for the whole session plus an admin session (on member
    0) that creates and removes each test's chroot."""

    def __init__(self, ensemble: Ensemble, admin: KazooClient):
        self.ensemble = ensemble
        self.admin = admin
        self.leader = ensemble.leader()
        self._tests = itertools.count()

    def _fail_if_a_member_died(self, when: str) -> None:
        try:
            self.ensemble.check_running()
        except ServerStartError as e:
            failure = str(e)
        else:
            return
        pytest.fail(f"{when}: {failure}", pytrace=False)

    def target_for(self, test_name: str) -> EnsembleTarget:
        self._fail_if_a_member_died("before the test")
        n = next(self._tests)
        chroot = f"{ENSEMBLE_TEST_ROOT}/{n:04d}-{re.sub(r'[^A-Za-z0-9_-]+', '_', test_name)}"
        self.admin.create(chroot)
        return EnsembleTarget(self.ensemble, chroot, first_member=n % len(self.ensemble.members))

    def release(self, target: EnsembleTarget) -> None:
        """Deletes the test's chroot and everything under it (the test's
        clients are closed by now: kazoo_factory depends on `server`), then
        checks that every member is still running."""
        self._fail_if_a_member_died("after the test")
        # sync: the admin's member has applied every change the test made
        # through other members (e.g. the closeSession of an ephemeral owner).
        self.admin.sync(target.chroot)
        self._delete_tree(target.chroot)
        leader = self.ensemble.leader()
        if leader != self.leader:
            warnings.warn(
                f"{self.ensemble.flavor}: the leader changed from member {self.leader} to "
                f"{leader} during this test (modes now {self.ensemble.modes()})"
            )
            self.leader = leader

    def _delete_tree(self, path: str) -> bool:
        """Deletes `path` and its subtree, as far as ACLs let the admin
        session (no credentials) do it: a node whose ACL denies READ cannot
        be listed, so it is deleted as a leaf (delete checks only the
        parent's ACL) and stays if it has children; a node under a parent
        that denies DELETE stays. What stays is harmless: each test's chroot
        is unique. Returns whether `path` is gone."""
        try:
            children = self.admin.get_children(path)
        except NoNodeError:
            return True
        except NoAuthError:
            children, listed = [], False
        else:
            listed = True
        gone = all([self._delete_tree(f"{path}/{child}") for child in children])
        try:
            self.admin.delete(path)
        except NoNodeError:
            pass
        except NoAuthError:
            return False  # the parent's ACL denies DELETE to the admin
        except NotEmptyError:
            if listed and gone:
                raise  # every child it listed is deleted, and no client of the test is left
            return False
        return True

    def close(self) -> None:
        self.admin.stop()
        self.admin.close()
        self.ensemble.close()


def _shared_ensemble(flavor: str):
    try:
        ensemble = start_ensemble(flavor, extra_cfg=SHARED_CFG)
    except ServerStartError as e:
        failure = str(e)
    else:
        failure = None
    if failure is not None:  # outside `except`, so the report shows no chained traceback
        pytest.fail(f"the {flavor} did not start: {failure}", pytrace=False)
    yield from _share(ensemble)


def _share(ensemble):
    """The SharedEnsemble of a started ensemble (or StandaloneAsEnsemble),
    with its admin session on member 0 and the tests' root; closed after."""
    try:
        admin = connect(ensemble.connect_string(0), randomize_hosts=False)
        admin.ensure_path(ENSEMBLE_TEST_ROOT)
    except BaseException:
        ensemble.close()
        raise
    shared = SharedEnsemble(ensemble, admin)
    yield shared
    shared.close()


@pytest.fixture(scope="session")
def zookeeper_ensemble():
    """A 3-member Apache ZooKeeper ensemble for the whole session (SharedEnsemble)."""
    yield from _shared_ensemble("zookeeper-ensemble")


@pytest.fixture(scope="session")
def wazoo_ensemble():
    """A 3-member wazoo ensemble for the whole session (SharedEnsemble)."""
    yield from _shared_ensemble("wazoo-ensemble")


class StandaloneAsEnsemble:
    """A standalone server with the few methods of servers.Ensemble that
    SharedEnsemble and EnsembleTarget use: an ensemble of one, which never
    reports a leader."""

    def __init__(self, srv):
        self.members = [srv]
        self.flavor = srv.flavor

    def connect_string(self, first: int = 0, chroot: str = "") -> str:
        return self.members[0].hosts + chroot

    def leader(self) -> None:
        return None

    def modes(self) -> list[str | None]:
        return [self.members[0].mode()]

    def check_running(self) -> None:
        srv = self.members[0]
        if not srv.is_running():
            raise ServerStartError(
                f"{srv.flavor} on {srv.hosts} is no longer running; log {srv.log_path}:\n"
                + srv.log_tail()
            )

    def close(self) -> None:
        self.members[0].close()


def _shared_standalone(flavor: str):
    yield from _share(StandaloneAsEnsemble(_start_standalone(flavor, SHARED_CFG)))


@pytest.fixture(scope="session")
def zookeeper_shared():
    """A standalone Apache ZooKeeper for the whole session, shared as the
    ensembles are (serve_shared_target)."""
    yield from _shared_standalone("zookeeper")


@pytest.fixture(scope="session")
def wazoo_shared():
    """A standalone wazoo for the whole session, shared as the ensembles
    are (serve_shared_target)."""
    yield from _shared_standalone("wazoo")


def serve_shared_target(request, target: str):
    """The body of `server` for a test module whose tests need no fresh
    server: a standalone target is then one server for the whole session,
    each test in a chroot of its own, exactly as on the shared ensembles
    (.is_ensemble stays False). Saves a server start per test (seconds for
    ZooKeeper's JVM)."""
    fixture = target.replace("-", "_") if target in ENSEMBLE_FLAVORS else f"{target}_shared"
    shared = request.getfixturevalue(fixture)
    shared_target = shared.target_for(request.node.name)
    yield shared_target
    shared.release(shared_target)


@pytest.fixture(params=TARGETS)
def server(request):
    """The server of this test's target: a fresh standalone server
    (servers.ServerProcess) or a chroot of its own on a shared ensemble
    (EnsembleTarget). Either way `.hosts` is the connect string, `.flavor`
    the target's name and `.is_ensemble` says which."""
    yield from serve_target(request, request.param)


def serve_target(request, target: str):
    """The body of `server` for one target; a test module that runs on some
    targets only overrides `server` with its own params and this."""
    if target in ENSEMBLE_FLAVORS:
        shared = request.getfixturevalue(target.replace("-", "_"))
        ensemble_target = shared.target_for(request.node.name)
        yield ensemble_target
        shared.release(ensemble_target)
    else:
        srv = _start_standalone(target)
        yield srv
        srv.close()


def wait_for_recipes(members, modules) -> None:
    """Until every member serves the recipe modules named, compiled (`recp`
    lists each with loads= above 0): a fresh wazoo compiles its built-in
    modules after it starts serving."""
    deadline = time.monotonic() + 300
    for member in members:
        while True:
            recp = member.four_letter("recp")
            loaded = {line.split()[0].removeprefix("module="): line for line in recp.splitlines()
                      if line.startswith("module=")}
            if all(m in loaded and " loads=0 " not in loaded[m] for m in modules):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the built-in modules were not served within 300 s: {recp}")
            time.sleep(0.2)


def serve_with_recipes(request, target: str, modules):
    """serve_target, once every member serves the recipe `modules`: the
    body of `server` for a test module that calls recipes (wazoo only)."""
    for served in serve_target(request, target):
        wait_for_recipes(served.ensemble.members if served.is_ensemble else [served], modules)
        yield served


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
    `kazoo_factory(auth_data=[("digest", "user:pw")])`. All are closed at
    teardown. On an ensemble the k-th client of a test prefers member
    (first_member + k) % 3 (see EnsembleTarget.client_hosts)."""
    clients = []

    def make(**kwargs) -> KazooClient:
        if server.is_ensemble:
            hosts = server.client_hosts(len(clients))
            kwargs.setdefault("randomize_hosts", False)
        else:
            hosts = server.hosts
        client = connect(hosts, **kwargs)
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
