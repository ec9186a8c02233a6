"""Replays the golden wire exchanges of tests/golden/*.hex (captured from
Apache ZooKeeper by tests/golden/capture.py) against each server and checks
every reply frame byte for byte, except the masked ranges (session ids,
passwords, zxids, times). See tests/golden/README.md for the file format.

The exchanges run in capture order ("# step: N") on the connections they
name, each opened with a fresh session; their requests depend on the tree
the earlier steps built.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
IO_TIMEOUT = 10.0


@dataclass
class GoldenFrame:
    direction: str  # ">" request, "<" reply
    conn: str
    data: bytes
    masks: list[tuple[int, int, str]] = field(default_factory=list)


@dataclass
class GoldenExchange:
    name: str
    step: int
    frames: list[GoldenFrame]


def parse_golden(path: Path) -> GoldenExchange:
    step, frames = None, []
    for line in path.read_text().splitlines():
        if line.startswith("# step:"):
            step = int(line.split(":", 1)[1].split()[0])
        elif line.startswith("#") or not line.strip():
            continue
        elif line[0] in "<>":
            tag, hexdata = line.split(" ", 1)
            frames.append(GoldenFrame(tag[0], tag[1:] or "main", bytes.fromhex(hexdata)))
        elif line.startswith("~ "):
            span, label = line[2:].split(" ", 1)
            start, end = (int(x) for x in span.split(".."))
            frames[-1].masks.append((start, end, label))
        else:
            raise ValueError(f"{path}: unexpected line {line!r}")
    assert step is not None, f"{path} has no '# step:' line"
    return GoldenExchange(path.stem, step, frames)


def golden_exchanges() -> list[GoldenExchange]:
    exchanges = sorted((parse_golden(p) for p in GOLDEN_DIR.glob("*.hex")), key=lambda e: e.step)
    assert [e.step for e in exchanges] == list(range(1, len(exchanges) + 1)), "steps not 1..N"
    return exchanges


class RawConn:
    def __init__(self, host: str, port: int):
        self.sock = socket.create_connection((host, port), timeout=IO_TIMEOUT)
        self.sock.settimeout(IO_TIMEOUT)

    def send(self, data: bytes):
        self.sock.sendall(data)

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return buf

    def recv_frame(self) -> bytes:
        head = self._exact(4)
        return head + self._exact(struct.unpack(">i", head)[0])

    def open_session(self):
        """ConnectRequest: protocol 0, lastZxid 0, timeout 30 s, new session, readOnly false."""
        body = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + b"\0" * 16 + b"\0"
        self.send(struct.pack(">i", len(body)) + body)
        self.recv_frame()
        return self

    def close(self):
        self.sock.close()


def differences(expected: GoldenFrame, got: bytes) -> str | None:
    if len(got) != len(expected.data):
        return f"length {len(got)} != golden {len(expected.data)}"
    bad = [
        i for i in range(len(got))
        if got[i] != expected.data[i] and not any(a <= i < b for a, b, _ in expected.masks)
    ]
    if bad:
        return f"bytes differ at offsets {bad[:20]}"
    return None


def test_golden_fixtures_exist():
    """The fixtures are checked in (regenerate: python3 tests/golden/capture.py)."""
    assert len(golden_exchanges()) >= 30


def replay(host: str, port: int, failures: list[str]) -> None:
    """Runs every exchange in step order; appends one line per mismatch;
    stops at the first reply that does not arrive."""
    conns: dict[str, RawConn] = {}
    try:
        for ex in golden_exchanges():
            for frame in ex.frames:
                if frame.conn not in conns:
                    conns[frame.conn] = RawConn(host, port)
                    if frame.conn != "new":  # "new" is a connect exchange's own connection
                        conns[frame.conn].open_session()
                conn = conns[frame.conn]
                if frame.direction == ">":
                    conn.send(frame.data)
                    continue
                try:
                    got = conn.recv_frame()
                except OSError as e:
                    failures.append(f"step {ex.step} {ex.name} ({frame.conn}): no reply frame: {e}")
                    return
                problem = differences(frame, got)
                if problem:
                    failures.append(
                        f"step {ex.step} {ex.name} ({frame.conn}): {problem}\n"
                        f"      golden {frame.data.hex()}\n      got    {got.hex()}"
                    )
            if "new" in conns:
                conns.pop("new").close()
    finally:
        for conn in conns.values():
            conn.close()


def test_golden_exchanges_replay_byte_for_byte(standalone_server):
    """Each reply equals Apache ZooKeeper's captured reply outside the masks.

    Standalone servers only (the `standalone_server` fixture, not `server`):
    the captures were made on a fresh standalone server, the exchanges talk
    to one port, and the requests of later steps depend on the tree earlier
    steps built from an empty root, which a shared ensemble does not have."""
    failures: list[str] = []
    replay(standalone_server.host, standalone_server.port, failures)
    if failures:
        pytest.fail("replies differ from Apache ZooKeeper's:\n  " + "\n  ".join(failures), pytrace=False)
