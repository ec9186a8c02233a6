"""wazoo's server-side lock recipe and kazoo's Lock on the same path exclude
each other (docs/BUILTIN_RECIPES.md, "lock": its node layout interoperates
with kazoo's Lock on the same path, so clients of both kinds exclude each
other during a migration). ZooKeeper Recipes and Solutions, "Locks": the
lowest sequence number holds; each contender waits on its predecessor only.

The wazoo side is a `wazoo cli` process driven on stdin (`call lock acquire
...`), holding its session (and so its lock node) while it runs.
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout

from servers import WAIT, find_wazoo_bin, start_server

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lock_module() -> Path:
    """recipes-wasm/ built (scripts/build-recipes.sh); the lock module's path."""
    out = REPO / "target" / "recipes-pytest"
    subprocess.run(["bash", str(REPO / "scripts" / "build-recipes.sh"), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return out / "lock.wasm"


@pytest.fixture
def wazoo_with_lock(lock_module: Path):
    plugins = Path(tempfile.mkdtemp(prefix="wazoo-plugins-"))
    shutil.copy(lock_module, plugins / "lock.wasm")
    srv = start_server("wazoo", extra_cfg=[f"plugins.dir={plugins}"])
    yield srv
    srv.close()
    shutil.rmtree(plugins, ignore_errors=True)


class Shell:
    """An interactive `wazoo cli` whose output lines arrive on a queue."""

    def __init__(self, hosts: str):
        self.proc = subprocess.Popen(
            [str(find_wazoo_bin()), "cli", "--server", hosts],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, command: str):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, needle: str, timeout: float = WAIT) -> str:
        """The first output line containing `needle` (fails after `timeout`)."""
        seen = []
        try:
            while True:
                line = self.lines.get(timeout=timeout)
                seen.append(line)
                if needle in line:
                    return line
        except queue.Empty:
            pytest.fail(f"wazoo cli printed no line with {needle!r} within {timeout}s; got {seen}")

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_wazoo_lock_and_kazoo_lock_exclude_each_other(wazoo_with_lock):
    hosts = wazoo_with_lock.hosts
    kz = KazooClient(hosts=hosts)
    kz.start(timeout=WAIT)
    shell = Shell(hosts)
    try:
        # kazoo holds: the wazoo recipe waits behind it.
        klock = kz.Lock("/locks/x", "kazoo-holder")
        assert klock.acquire(timeout=WAIT)
        shell.send("""call lock acquire '{"path":"/locks/x","id":"wazoo"}'""")
        shell.expect("waiting (token acquire:/locks/x)")
        contenders = kz.get_children("/locks/x")
        assert len(contenders) == 2, contenders
        assert all("__lock__" in c for c in contenders), contenders
        assert sorted(klock.contenders()) == ["kazoo-holder", "wazoo"]

        # kazoo releases: the wazoo waiter holds now (its callback ran).
        klock.release()
        held = shell.expect("__lock__")
        assert held.strip().strip('"').startswith("/locks/x/")

        # wazoo holds: a kazoo contender cannot get it...
        klock2 = kz.Lock("/locks/x", "kazoo-second")
        with pytest.raises(LockTimeout):
            klock2.acquire(timeout=1.0)
        # ...until the wazoo holder releases.
        shell.send("""call lock release '{"path":"/locks/x"}'""")
        shell.expect("true")
        assert klock2.acquire(timeout=WAIT)
        klock2.release()
    finally:
        shell.close()
        kz.stop()
        kz.close()
