"""The super user (digest authentication against
`DigestAuthenticationProvider.superDigest`) and the refusals of kazoo's
reconfig, asserted identically against Apache ZooKeeper 3.8 and wazoo,
standalone and as 3-member ensembles. Every shared server runs with
`reconfigEnabled=true` and the super user super:test (conftest.SHARED_CFG);
no test here changes the membership (test_reconfig_kazoo.py does, on
ensembles of its own).

Doc references: ZooKeeper Administrator's Guide, "Authentication &
Authorization Options" (zookeeper.DigestAuthenticationProvider.superDigest),
ZooKeeper Programmer's Guide, "ZooKeeper access control using ACLs", and
ZooKeeper Dynamic Reconfiguration, "Specifying the client port", "Incremental
mode", "Conditional reconfig" and "Security".
"""

from __future__ import annotations

import pytest
from conftest import connect, serve_shared_target
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoAuthError,
    UnimplementedError,
)
from kazoo.security import make_digest_acl

from servers import TARGETS

SUPER = [("digest", "super:test")]


@pytest.fixture(params=TARGETS)
def server(request):
    yield from serve_shared_target(request, request.param)


@pytest.fixture
def unrooted(server):
    """Call it for a client of the test's server outside the test's chroot
    (for /zookeeper/config); closed at teardown."""
    clients = []

    def make(**kwargs):
        zk = connect(server.ensemble.connect_string(server.first_member), **kwargs)
        clients.append(zk)
        return zk

    yield make
    for zk in clients:
        zk.stop()
        zk.close()


def test_the_super_user_passes_every_acl(kazoo_factory):
    """Administrator's Guide, superDigest: a session authenticated as the
    super user may read, write, list, change ACLs and delete whatever the
    ACL says; the same name with a wrong password is only another digest
    identity (the auth itself succeeds) and is refused."""
    admin = kazoo_factory(auth_data=SUPER)
    wrong = kazoo_factory(auth_data=[("digest", "super:not-it")])
    anyone = kazoo_factory()
    admin.create("/alice", b"a", acl=[make_digest_acl("alice", "pw", all=True)])
    for zk in (wrong, anyone):
        zk.sync("/alice")
        with pytest.raises(NoAuthError):
            zk.get("/alice")
        with pytest.raises(NoAuthError):
            zk.set("/alice", b"x")
        with pytest.raises(NoAuthError):
            zk.create("/alice/child")
    assert admin.get("/alice")[0] == b"a"
    assert admin.set("/alice", b"b").version == 1
    acls, stat = admin.get_acls("/alice")
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [
        (31, "digest", "alice:V55/p2T0OpjQ+low3NVAH4aLvm0=")
    ]
    assert admin.create("/alice/child", b"c") == "/alice/child"
    admin.set_acls("/alice/child", [make_digest_acl("bob", "pw", read=True)])
    assert admin.get("/alice/child")[0] == b"c"
    assert admin.delete("/alice/child") is True
    assert admin.delete("/alice") is True
    anyone.sync("/")
    assert anyone.exists("/alice") is None


def test_config_node_is_read_only_to_everyone_but_the_super_user(unrooted):
    """Dynamic Reconfiguration, "Security": /zookeeper/config is readable by
    anyone (world:anyone READ) and written by nobody else."""
    zk = unrooted()
    acls, _ = zk.get_acls("/zookeeper/config")
    assert [(a.perms, a.id.scheme, a.id.id) for a in acls] == [(1, "world", "anyone")]
    with pytest.raises(NoAuthError):
        zk.set("/zookeeper/config", b"x")


def test_reconfig_refusals(server, unrooted):
    """Dynamic Reconfiguration: on an ensemble a reconfig from anyone but
    the super user is refused with NoAuth ("Security"), one from a stale
    config version with BadVersion ("Conditional reconfig"), a malformed
    server line or incremental and bulk changes together with BadArguments;
    a standalone server implements no reconfig at all (Unimplemented,
    whoever asks, before any other check)."""
    admin = unrooted(auth_data=SUPER)
    wrong = unrooted(auth_data=[("digest", "super:not-it")])
    anyone = unrooted()
    data, _ = admin.get("/zookeeper/config")
    version = next(
        int(line.removeprefix("version="), 16)
        for line in data.decode().splitlines() + ["version=0"]
        if line.startswith("version=")
    )

    def leave_3(zk, **kw):
        return zk.reconfig(joining=None, leaving="3", new_members=None, **kw)

    refusals = [
        (lambda: leave_3(anyone), NoAuthError),
        (lambda: leave_3(wrong), NoAuthError),
        (lambda: leave_3(admin, from_config=version + 1), BadVersionError),
        (
            lambda: admin.reconfig(joining="server.9=garbage", leaving=None, new_members=None),
            BadArgumentsError,
        ),
        (
            lambda: admin.reconfig(
                joining="server.9=127.0.0.1:1:2;3",
                leaving=None,
                new_members="server.1=127.0.0.1:1:2;3",
            ),
            BadArgumentsError,
        ),
    ]
    for i, (attempt, refusal) in enumerate(refusals):
        expected = refusal if server.is_ensemble else UnimplementedError
        with pytest.raises(expected):
            attempt()
            pytest.fail(f"refusal {i} was accepted")
    # Nothing changed.
    admin.sync("/zookeeper/config")
    assert admin.get("/zookeeper/config")[0] == data
    if server.is_ensemble:
        assert data.decode().count("server.") == 3
    else:
        assert data == b""
