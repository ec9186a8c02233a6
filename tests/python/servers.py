"""Start Apache ZooKeeper or wazoo on loopback for tests (the Python twin of
the Rust crate wazoo-testkit): a standalone server (``start_server()``) or a
3-member ensemble (``start_ensemble()``, the twin of the testkit's
ZkEnsemble and WazooEnsemble).

Every server binds 127.0.0.1 on a port the kernel handed out, lives in its
own temporary directory (data, zoo.cfg, log), is killed by ``kill()`` /
``close()`` / interpreter exit, and also by the kernel if the Python process
dies (PR_SET_PDEATHSIG). Every wait is bounded and its error says what it
waited for, with the tail of the server's log (of every member's, for an
ensemble).

Apache ZooKeeper comes from the Debian package ``zookeeper`` (3.8):
``java -cp <conf dir>:/usr/share/java/zookeeper.jar:... QuorumPeerMain zoo.cfg``;
see ``zookeeper_classpath()``.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBIAN_JAVA_DIR = Path("/usr/share/java")
ZK_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
FOUR_LETTER_TIMEOUT = 5.0
# Bound on every wait in the tests for a connection, a watch event or a session change.
WAIT = 15.0
DEFAULT_STARTUP_TIMEOUT = 30.0
START_ATTEMPTS = 3

LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
"""


class ServerStartError(RuntimeError):
    """A server did not come up; the message carries its log tail."""


class WazooBinaryMissing(ServerStartError):
    """target/debug/wazoo (or $WAZOO_BIN) does not exist."""


_handed_out_ports: set[int] = set()


def free_port() -> int:
    """A loopback port that was free a moment ago; never the same one twice
    in this process."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out_ports:
            _handed_out_ports.add(port)
            return port
    raise RuntimeError("free_port: only got ports already handed out")


def four_letter_word(host: str, port: int, word: str, timeout: float = FOUR_LETTER_TIMEOUT) -> str:
    """Send a four-letter word (ruok, srvr, mntr, ...) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(host: str, port: int) -> str | None:
    """The `Mode:` line of `srvr` (standalone, leader, follower, observer,
    read-only), None if the server does not answer or is not serving."""
    try:
        srvr = four_letter_word(host, port, "srvr")
    except OSError:
        return None
    for line in srvr.splitlines():
        if line.startswith("Mode: "):
            return line[len("Mode: "):].strip()
    return None


def _mentions_address_in_use(text: str) -> bool:
    return "Address already in use" in text or "AddrInUse" in text


def zookeeper_classpath() -> list[str]:
    """Jars for an Apache ZooKeeper server.

    Debian's /usr/share/java/zookeeper.jar names its runtime dependencies in
    its manifest Class-Path, but no SLF4J binding: add slf4j-log4j12 and
    log4j-1.2 so the server logs (to stdout, which goes to the log file).
    $ZOOKEEPER_CLASSPATH overrides the search."""
    override = os.environ.get("ZOOKEEPER_CLASSPATH")
    if override:
        return override.split(os.pathsep)
    server_jar = DEBIAN_JAVA_DIR / "zookeeper.jar"
    if not server_jar.is_file():
        raise ServerStartError(
            f"Apache ZooKeeper not found: {server_jar} is missing. Install the Debian "
            "package `zookeeper` (scripts/setup.sh does) or set ZOOKEEPER_CLASSPATH."
        )
    jars = [server_jar, DEBIAN_JAVA_DIR / "zookeeper-jute.jar"]
    binding = [DEBIAN_JAVA_DIR / "slf4j-log4j12.jar", DEBIAN_JAVA_DIR / "log4j-1.2.jar"]
    if all(j.is_file() for j in binding):
        jars += binding
    return [str(j) for j in jars]


def find_wazoo_bin() -> Path:
    """$WAZOO_BIN, else <repo>/target/debug/wazoo (or $CARGO_TARGET_DIR/debug/wazoo)."""
    if os.environ.get("WAZOO_BIN"):
        path = Path(os.environ["WAZOO_BIN"])
        if not path.is_file():
            raise WazooBinaryMissing(f"WAZOO_BIN={path} does not name a file")
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    path = target / "debug" / "wazoo"
    if not path.is_file():
        raise WazooBinaryMissing(
            f"the wazoo binary {path} does not exist: run `cargo build --workspace` "
            "(scripts/test.sh does) or set WAZOO_BIN. A missing server is a failure, not a skip."
        )
    return path


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL it when we die."""
    pr_set_pdeathsig = 1
    _libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


_libc = ctypes.CDLL(None, use_errno=True)
_live_servers: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_live_servers):
        server.close()


def _render_cfg(entries: dict[str, str]) -> str:
    return "# written by tests/python/servers.py\n" + "".join(f"{k}={v}\n" for k, v in entries.items())


def _parse_extra(lines) -> dict[str, str]:
    out = {}
    for line in lines or ():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise ValueError(f"extra zoo.cfg line {line!r} is not key=value")
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


class ServerProcess:
    """One server process of either flavor. Use ``start_server()``."""

    flavor = "?"
    log_name = "server.log"
    # A single server (or one member); conftest's EnsembleTarget says True.
    is_ensemble = False

    def __init__(
        self,
        tick_time_ms: int = 2000,
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        extra_cfg: list[str] | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        env: dict[str, str] | None = None,
    ):
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.extra_cfg = list(extra_cfg or [])
        self.startup_timeout = startup_timeout
        self.env = dict(env or {})
        self.dir: Path | None = None
        self.port: int | None = None
        # Set for ensemble members: ready once `srvr` reports one of these modes.
        self.ready_modes: tuple[str, ...] | None = None
        self.proc: subprocess.Popen | None = None
        self._log_file = None

    # -- what each flavor provides ------------------------------------------------

    def _command(self, cfg_path: Path) -> list[str]:
        raise NotImplementedError

    def _flavor_cfg(self) -> dict[str, str]:
        return {}

    def _ready(self) -> bool:
        if self.ready_modes is not None:
            return self.mode() in self.ready_modes
        return self.four_letter("ruok") == "imok"

    # -- public API ---------------------------------------------------------------

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def hosts(self) -> str:
        """Connect string for kazoo and other clients."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_path(self) -> Path:
        return self.dir / self.log_name

    def start(self) -> "ServerProcess":
        last = ""
        for _ in range(START_ATTEMPTS):
            self.dir = Path(tempfile.mkdtemp(prefix=f"wazoo-py-{self.flavor}-"))
            self.data_dir.mkdir()
            self.port = free_port()
            self.write_cfg()
            try:
                self._spawn()
                self._wait_ready()
                return self
            except ServerStartError as e:
                last = str(e)
                self.close()
                if not _mentions_address_in_use(last):
                    raise
        raise ServerStartError(f"{self.flavor} failed to start {START_ATTEMPTS} times: {last}")

    def base_cfg(self) -> dict[str, str]:
        """The zoo.cfg keys every test server gets, in both flavors (before
        the flavor's own keys and `extra_cfg`)."""
        cfg = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": "127.0.0.1",
            "4lw.commands.whitelist": "*",
            "extendedTypesEnabled": "true",
            # On by default on port 8080 in both: test servers side by
            # side would contend for it.
            "admin.enableServer": "false",
        }
        if self.min_session_timeout_ms is not None:
            cfg["minSessionTimeout"] = str(self.min_session_timeout_ms)
        if self.max_session_timeout_ms is not None:
            cfg["maxSessionTimeout"] = str(self.max_session_timeout_ms)
        return cfg

    def write_cfg(self, member_cfg: dict[str, str] | None = None) -> Path:
        """Writes <dir>/zoo.cfg: base_cfg(), then `member_cfg` (an ensemble's
        initLimit, syncLimit and server.N lines), then the flavor's keys,
        then `extra_cfg` (which wins)."""
        cfg = self.base_cfg()
        cfg.update(member_cfg or {})
        cfg.update(self._flavor_cfg())
        cfg.update(_parse_extra(self.extra_cfg))
        path = self.dir / "zoo.cfg"
        path.write_text(_render_cfg(cfg))
        return path

    def four_letter(self, word: str) -> str:
        return four_letter_word(self.host, self.port, word)

    def mode(self) -> str | None:
        """`srvr`'s `Mode:` (standalone, leader, follower, observer, read-only),
        None if the server is down or not serving."""
        return server_mode(self.host, self.port)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9, keeping the data directory and port for restart()."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds. Returns the exit code
        if it exited by itself."""
        if self.proc is None:
            return None
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        return code

    def restart(self) -> None:
        """Start again on the same port and data directory."""
        self.kill()
        self._spawn()
        self._wait_ready()

    def close(self) -> None:
        """Kill the server and remove its temporary directory."""
        self.kill()
        _live_servers.discard(self)
        if self.dir is not None and not os.environ.get("WAZOO_KEEP_TEST_DIRS"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_bytes()[-65536:].decode("utf-8", "replace")
        except OSError as e:
            return f"(cannot read {self.log_path}: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"<{self.flavor} server {self.hosts}>"

    # -- internals ----------------------------------------------------------------

    def _spawn(self) -> None:
        self._log_file = open(self.log_path, "ab")
        env = dict(os.environ)
        env.update(self.env)
        try:
            self.proc = subprocess.Popen(
                self._command(self.dir / "zoo.cfg"),
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent,
            )
        except OSError as e:
            raise ServerStartError(f"cannot start {self.flavor}: {e}") from e
        _live_servers.add(self)

    def _log_hint(self) -> str:
        return f"log {self.log_path} (kept after the test only with WAZOO_KEEP_TEST_DIRS=1)"

    def _ready_what(self) -> str:
        if self.ready_modes is not None:
            return "srvr -> Mode: " + "/".join(self.ready_modes)
        return "ruok -> imok"

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"{self.flavor} exited with code {code} before {self._ready_what()} on "
                    f"{self.hosts}; {self._log_hint()}:\n{self.log_tail()}"
                )
            try:
                if self._ready():
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                self.kill()
                raise ServerStartError(
                    f"{self.flavor} did not reach {self._ready_what()} on {self.hosts} within "
                    f"{self.startup_timeout}s (killed it); {self._log_hint()}:\n{self.log_tail()}"
                )
            time.sleep(0.05)


class ZooKeeperServer(ServerProcess):
    """Standalone Apache ZooKeeper 3.8 from the Debian package."""

    flavor = "zookeeper"
    log_name = "zookeeper.log"

    def __init__(self, jvm_flags: list[str] | None = None, **kwargs):
        """jvm_flags: more java arguments before the main class, e.g.
        system properties ZooKeeper reads only from there
        ("-Dreadonlymode.enabled=true")."""
        super().__init__(**kwargs)
        self.jvm_flags = list(jvm_flags or [])

    def _flavor_cfg(self) -> dict[str, str]:
        return {"admin.enableServer": "false"}

    def _command(self, cfg_path: Path) -> list[str]:
        (self.dir / "log4j.properties").write_text(LOG4J_PROPERTIES)
        classpath = os.pathsep.join([str(self.dir)] + zookeeper_classpath())
        java = os.environ.get("JAVA") or shutil.which("java") or "java"
        return [
            java,
            "-Xmx1g",
            f"-Dzookeeper.log.dir={self.dir}",
            "-Dzookeeper.root.logger=INFO,CONSOLE",
            f"-Dlog4j.configuration=file:{self.dir}/log4j.properties",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            *self.jvm_flags,
            "-cp",
            classpath,
            ZK_MAIN_CLASS,
            str(cfg_path),
        ]

    def _ready(self) -> bool:
        if self.ready_modes is not None:
            return self.mode() in self.ready_modes
        return self.four_letter("ruok") == "imok" and "Mode: " in self.four_letter("srvr")


class WazooServer(ServerProcess):
    """`wazoo serve --config zoo.cfg`, binary from find_wazoo_bin()."""

    flavor = "wazoo"
    log_name = "wazoo.log"

    def __init__(self, binary: Path | None = None, **kwargs):
        super().__init__(**kwargs)
        self.binary = Path(binary) if binary else find_wazoo_bin()
        self.env.setdefault("RUST_BACKTRACE", "1")
        if "RUST_LOG" not in os.environ:
            self.env.setdefault("RUST_LOG", "info")

    def _command(self, cfg_path: Path) -> list[str]:
        return [str(self.binary), "serve", "--config", str(cfg_path)]


FLAVORS = ("zookeeper", "wazoo")


def start_server(flavor: str, **kwargs) -> ServerProcess:
    """Start a standalone server of `flavor` ("zookeeper" or "wazoo") and wait
    until it answers ruok with imok. kwargs: tick_time_ms,
    min_session_timeout_ms, max_session_timeout_ms, extra_cfg (list of
    "key=value"), startup_timeout (s), env; for ZooKeeper also jvm_flags
    (list of java arguments)."""
    if flavor == "zookeeper":
        return ZooKeeperServer(**kwargs).start()
    if flavor == "wazoo":
        return WazooServer(**kwargs).start()
    raise ValueError(f"unknown server flavor {flavor!r}; expected one of {FLAVORS}")


# -- ensembles ------------------------------------------------------------------------

ENSEMBLE_SIZE = 3
# Three JVMs (or wazoo processes) starting at once and electing a leader.
DEFAULT_ENSEMBLE_STARTUP_TIMEOUT = 60.0
# What every member of a ready ensemble answers in `srvr` (no observers here).
MEMBER_MODES = ("leader", "follower")


class Ensemble:
    """`size` members of one flavor on loopback: the Python twin of the
    testkit's ZkEnsemble and WazooEnsemble (testkit/src/zookeeper.rs,
    testkit/src/ensemble.rs), with the same zoo.cfg.

    Member i (0-based) has myid i + 1, its own client, quorum and election
    port and its own directory ``<dir>/member-<myid>`` holding ``data/``
    (with the ``myid`` file), ``zoo.cfg`` and the log. Every member's zoo.cfg
    has the base keys of a standalone server, ``initLimit=10``,
    ``syncLimit=5`` and one ``server.N`` line per member. Ready when every
    member answers ``srvr`` with ``Mode: leader`` or ``Mode: follower`` and
    exactly one says leader. Use ``start_ensemble()``; ``close()`` (or
    interpreter exit, or the death of this process) kills every member.
    """

    flavor = "?"
    member_class: type = ServerProcess

    def __init__(
        self,
        size: int = ENSEMBLE_SIZE,
        startup_timeout: float = DEFAULT_ENSEMBLE_STARTUP_TIMEOUT,
        **member_kwargs,
    ):
        if not 2 <= size <= 254:
            raise ValueError(f"ensemble size must be 2..=254, got {size}")
        self.size = size
        self.startup_timeout = startup_timeout
        self.member_kwargs = member_kwargs
        self.dir: Path | None = None
        self.members: list[ServerProcess] = []

    # -- what each flavor provides ------------------------------------------------

    def _server_line(self, client_port: int, quorum_port: int, election_port: int) -> str:
        """The value of `server.N=` for a member with these ports."""
        raise NotImplementedError

    # -- public API ---------------------------------------------------------------

    def start(self) -> "Ensemble":
        last = ""
        for _ in range(START_ATTEMPTS):
            try:
                self._spawn_members()
                self._wait_all_serving()
                return self
            except ServerStartError as e:
                last = str(e)
                self.close()
                if not _mentions_address_in_use(last):
                    raise
        raise ServerStartError(f"{self.flavor} failed to start {START_ATTEMPTS} times: {last}")

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def hosts(self) -> str:
        """Every member's client address, in myid order: the connect string."""
        return self.connect_string()

    def connect_string(self, first: int = 0, chroot: str = "") -> str:
        """Every member's client address starting at member `first` (a
        client that does not shuffle its host list tries them in this order),
        then `chroot` (e.g. "/some/root", or "")."""
        n = len(self.members)
        order = [self.members[(first + k) % n] for k in range(n)]
        return ",".join(f"{m.host}:{m.port}" for m in order) + chroot

    @property
    def ports(self) -> list[int]:
        return [m.port for m in self.members]

    def modes(self) -> list[str | None]:
        """`srvr`'s mode of every member (None for one down or not serving)."""
        return [m.mode() for m in self.members]

    def leader(self) -> int | None:
        """The index of the member that reports `Mode: leader`, if one does."""
        modes = self.modes()
        return modes.index("leader") if "leader" in modes else None

    def dead_members(self) -> list[int]:
        """Indexes of members whose process has exited (or was killed)."""
        return [i for i, m in enumerate(self.members) if not m.is_running()]

    def check_running(self) -> None:
        """Raises ServerStartError, with their log tails, if any member's
        process is gone."""
        dead = self.dead_members()
        if dead:
            codes = ", ".join(
                f"member {i} (myid {i + 1}) "
                + (
                    f"exited with code {self.members[i].proc.returncode}"
                    if self.members[i].proc is not None
                    else "was killed through kill()"
                )
                for i in dead
            )
            raise ServerStartError(
                f"{self.flavor} on {self.hosts}: a member is no longer running: {codes}\n"
                + self.log_tails(dead)
            )

    def log_tails(self, indexes=None, lines: int = 30) -> str:
        """The last `lines` lines of the logs of the given members (default all)."""
        indexes = range(len(self.members)) if indexes is None else indexes
        return "\n".join(
            f"--- member {i} (myid {i + 1}, client port {self.members[i].port}), "
            f"log {self.members[i].log_path}:\n{self.members[i].log_tail(lines)}"
            for i in indexes
        )

    def kill(self, i: int) -> None:
        """kill -9 member `i`, keeping its ports and data for restart(i)."""
        self.members[i].kill()

    def restart(self, i: int) -> None:
        """Start member `i` again on its ports and data directory and wait
        (bounded) until it serves as leader or follower."""
        self.members[i].restart()

    def close(self) -> None:
        """Kill every member and remove the ensemble's directory."""
        for m in self.members:
            m.close()
        if self.dir is not None and not os.environ.get("WAZOO_KEEP_TEST_DIRS"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"<{self.flavor} {self.hosts}>"

    # -- internals ----------------------------------------------------------------

    def _spawn_members(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"wazoo-py-{self.flavor}-"))
        ports = [(free_port(), free_port(), free_port()) for _ in range(self.size)]
        servers = {f"server.{i + 1}": self._server_line(*p) for i, p in enumerate(ports)}
        self.members = []
        for i, (client_port, _, _) in enumerate(ports):
            sid = i + 1
            member = self.member_class(startup_timeout=self.startup_timeout, **self.member_kwargs)
            member.flavor = f"{self.flavor} member {i} (myid {sid})"
            member.dir = self.dir / f"member-{sid}"
            member.data_dir.mkdir(parents=True)
            (member.data_dir / "myid").write_text(f"{sid}\n")
            member.port = client_port
            member.ready_modes = MEMBER_MODES
            member.write_cfg({"initLimit": "10", "syncLimit": "5", **servers})
            self.members.append(member)
        for member in self.members:
            member._spawn()

    def _wait_all_serving(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            for i, m in enumerate(self.members):
                code = m.proc.poll()
                if code is not None:
                    raise ServerStartError(
                        f"{self.flavor}: member {i} (myid {i + 1}) exited with code {code} "
                        f"before srvr -> Mode: leader/follower on {m.hosts} "
                        f"(logs kept only with WAZOO_KEEP_TEST_DIRS=1):\n{self.log_tails()}"
                    )
            modes = self.modes()
            if all(mode in MEMBER_MODES for mode in modes) and modes.count("leader") == 1:
                return
            if time.monotonic() >= deadline:
                for m in self.members:
                    m.kill()
                raise ServerStartError(
                    f"{self.flavor} on {self.hosts} was not serving within {self.startup_timeout}s "
                    f"(every member answering srvr with Mode: leader or follower, one leader); "
                    f"last modes {modes} (killed them; logs kept only with "
                    f"WAZOO_KEEP_TEST_DIRS=1):\n{self.log_tails()}"
                )
            time.sleep(0.05)


class ZooKeeperEnsemble(Ensemble):
    """Apache ZooKeeper 3.8 members (QuorumPeerMain with server.N lines)."""

    flavor = "zookeeper-ensemble"
    member_class = ZooKeeperServer

    def _server_line(self, client_port, quorum_port, election_port) -> str:
        # As the testkit's ZkEnsemble: the client port comes from clientPort.
        return f"127.0.0.1:{quorum_port}:{election_port}"


class WazooEnsemble(Ensemble):
    """`wazoo serve --config zoo.cfg` members (wazoo uses the quorum port
    for all member traffic and ignores the election port)."""

    flavor = "wazoo-ensemble"
    member_class = WazooServer

    def __init__(self, binary: Path | None = None, **kwargs):
        super().__init__(**kwargs)
        # Resolved once, before any directory exists: a missing binary is a
        # setup failure of every wazoo-ensemble test.
        self.member_kwargs["binary"] = Path(binary) if binary else find_wazoo_bin()

    def _server_line(self, client_port, quorum_port, election_port) -> str:
        # As the testkit's WazooEnsemble: ZooKeeper 3.5+'s `;clientPort` suffix.
        return f"127.0.0.1:{quorum_port}:{election_port};{client_port}"


ENSEMBLE_FLAVORS = ("zookeeper-ensemble", "wazoo-ensemble")
# Every target the kazoo tests run against (conftest.py's `server` fixture).
TARGETS = FLAVORS + ENSEMBLE_FLAVORS


def start_ensemble(flavor: str, size: int = ENSEMBLE_SIZE, **kwargs) -> Ensemble:
    """Start a `size`-member ensemble of `flavor` ("zookeeper-ensemble" or
    "wazoo-ensemble", or just "zookeeper" / "wazoo") and wait until every
    member serves as leader or follower. kwargs: those of start_server()
    (applied to every member) and startup_timeout (s, for the whole ensemble)."""
    base = flavor.removesuffix("-ensemble")
    if base == "zookeeper":
        return ZooKeeperEnsemble(size=size, **kwargs).start()
    if base == "wazoo":
        return WazooEnsemble(size=size, **kwargs).start()
    raise ValueError(f"unknown ensemble flavor {flavor!r}; expected one of {ENSEMBLE_FLAVORS}")
