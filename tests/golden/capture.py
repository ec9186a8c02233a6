#!/usr/bin/env python3
"""Capture golden ZooKeeper wire exchanges from a real Apache ZooKeeper.

Sends hand-built jute frames over raw sockets and records each request
frame and the server's reply frames as hex, one file per exchange, in
tests/golden/*.hex (format: tests/golden/README.md). Bytes that legitimately
differ between runs or servers (session ids, passwords, zxids, timestamps)
are listed after each frame as `~ start..end label` mask lines.

By default it starts two fresh standalone servers (via tests/python/servers.py)
and runs the whole script against each: every byte that differs between the
two runs must be covered by a mask, otherwise the capture fails. With
--connect it uses a running server once (no such check).

    python3 tests/golden/capture.py            # rewrite tests/golden/*.hex
    python3 tests/golden/capture.py --check    # compare with the files instead

Jute: big-endian int (4) / long (8); bool is one byte; buffer and string are
an int length (-1 = null) + bytes; vector an int count (-1 = null) + items; a
frame is an int length + payload.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

from servers import four_letter_word, start_server  # noqa: E402

# --- protocol constants ----------------------------------------------------------------

OP = {
    "create": 1, "delete": 2, "exists": 3, "getData": 4, "setData": 5, "getACL": 6,
    "setACL": 7, "getChildren": 8, "sync": 9, "ping": 11, "getChildren2": 12, "check": 13,
    "multi": 14, "create2": 15, "reconfig": 16, "checkWatches": 17, "removeWatches": 18,
    "createContainer": 19, "deleteContainer": 20, "createTTL": 21, "multiRead": 22,
    "auth": 100, "setWatches": 101, "sasl": 102, "getEphemerals": 103,
    "getAllChildrenNumber": 104, "setWatches2": 105, "addWatch": 106, "whoAmI": 107,
    "createSession": -10, "closeSession": -11, "error": -1,
}
OP_NAME = {v: k for k, v in OP.items()}
ERR_NAME = {
    0: "OK", -2: "RuntimeInconsistency", -101: "NoNode", -102: "NoAuth", -103: "BadVersion",
    -108: "NoChildrenForEphemerals", -110: "NodeExists", -111: "NotEmpty",
    -112: "SessionExpired", -115: "AuthFailed", -119: "Unimplemented",
}
EVENT_TYPE = {1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged", 4: "NodeChildrenChanged"}
NOTIFICATION_XID, PING_XID, AUTH_XID, SET_WATCHES_XID = -1, -2, -4, -8
PERM_ALL = 31  # READ 1 | WRITE 2 | CREATE 4 | DELETE 8 | ADMIN 16 = cdrwa
WORLD_ANYONE = [(PERM_ALL, "world", "anyone")]
FLAGS = {"persistent": 0, "ephemeral": 1, "persistent_sequential": 2,
         "ephemeral_sequential": 3, "container": 4, "persistent_with_ttl": 5}
ADD_WATCH_MODE = {"persistent": 0, "persistent_recursive": 1}
SESSION_TIMEOUT_MS = 30000
IO_TIMEOUT = 10.0


# --- jute encoding with byte-range bookkeeping -------------------------------------------

class Writer:
    """Builds a frame payload; `vary=` marks a field's bytes as varying."""

    def __init__(self):
        self.buf = bytearray()
        self.masks: list[tuple[int, int, str]] = []

    def _put(self, data: bytes, vary: str | None):
        start = 4 + len(self.buf)  # offsets count from the frame start (length prefix)
        self.buf += data
        if vary:
            self.masks.append((start, start + len(data), vary))
        return self

    def int(self, v: int, vary=None):
        return self._put(struct.pack(">i", v), vary)

    def long(self, v: int, vary=None):
        return self._put(struct.pack(">q", v), vary)

    def bool(self, v: bool, vary=None):
        return self._put(b"\x01" if v else b"\x00", vary)

    def buffer(self, v: bytes | None, vary=None):
        if v is None:
            return self.int(-1)
        self.int(len(v))
        return self._put(bytes(v), vary)

    def string(self, s: str | None):
        return self.buffer(None if s is None else s.encode())

    def strings(self, items: list[str]):
        self.int(len(items))
        for s in items:
            self.string(s)
        return self

    def acls(self, acls):
        self.int(len(acls))
        for perms, scheme, ident in acls:
            self.int(perms).string(scheme).string(ident)
        return self

    def frame(self) -> bytes:
        return struct.pack(">i", len(self.buf)) + bytes(self.buf)


class Reader:
    """Parses a whole frame, logging fields and varying ranges."""

    def __init__(self, frame: bytes):
        self.data = frame
        self.pos = 0
        self.fields: list[str] = []
        self.masks: list[tuple[int, int, str]] = []
        length = self._take(4, "len")
        assert struct.unpack(">i", length)[0] == len(frame) - 4, "frame length mismatch"

    def _take(self, n: int, name: str, vary=None) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"frame ends inside field {name!r} at byte {self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        if vary:
            self.masks.append((self.pos, self.pos + n, vary))
        self.pos += n
        return chunk

    def _log(self, name, value, vary):
        self.fields.append(f"{name}=<{vary}>" if vary else f"{name}={value}")

    def int(self, name, vary=None) -> int:
        v = struct.unpack(">i", self._take(4, name, vary))[0]
        self._log(name, v, vary)
        return v

    def long(self, name, vary=None) -> int:
        v = struct.unpack(">q", self._take(8, name, vary))[0]
        self._log(name, hex(v) if v > 0xFFFF else v, vary)
        return v

    def bool(self, name) -> bool:
        v = self._take(1, name)[0]
        assert v in (0, 1), f"bool {name} is {v}"
        self._log(name, bool(v), None)
        return bool(v)

    def buffer(self, name, vary=None) -> bytes | None:
        n = struct.unpack(">i", self._take(4, name + ".len"))[0]
        if n < 0:
            self._log(name, None, None)
            return None
        v = self._take(n, name, vary)
        self._log(name, repr(v), vary)
        return v

    def string(self, name) -> str | None:
        n = struct.unpack(">i", self._take(4, name + ".len"))[0]
        if n < 0:
            self._log(name, None, None)
            return None
        v = self._take(n, name).decode()
        self._log(name, repr(v), None)
        return v

    def strings(self, name) -> list[str]:
        n = struct.unpack(">i", self._take(4, name + ".count"))[0]
        items = []
        for i in range(max(n, 0)):
            ln = struct.unpack(">i", self._take(4, f"{name}[{i}].len"))[0]
            items.append(self._take(ln, f"{name}[{i}]").decode())
        self._log(name, items, None)
        return items

    def stat(self, ephemeral: bool = False):
        """Stat: czxid mzxid ctime mtime (long) version cversion aversion (int)
        ephemeralOwner (long) dataLength numChildren (int) pzxid (long); 68 bytes."""
        self.long("stat.czxid", "zxid")
        self.long("stat.mzxid", "zxid")
        self.long("stat.ctime", "time")
        self.long("stat.mtime", "time")
        self.int("stat.version")
        self.int("stat.cversion")
        self.int("stat.aversion")
        self.long("stat.ephemeralOwner", "session" if ephemeral else None)
        self.int("stat.dataLength")
        self.int("stat.numChildren")
        self.long("stat.pzxid", "zxid")

    def acls(self, name="acl"):
        n = self.int(name + ".count")
        for i in range(n):
            self.int(f"{name}[{i}].perms")
            self.string(f"{name}[{i}].scheme")
            self.string(f"{name}[{i}].id")

    def reply_header(self):
        xid = self.int("xid")
        zxid = self.long("zxid", None if xid == NOTIFICATION_XID else "zxid")
        err = self.int("err")
        if err:
            self.fields[-1] = f"err={err} ({ERR_NAME.get(err, '?')})"
        return xid, zxid, err

    def end(self):
        if self.pos != len(self.data):
            raise ValueError(f"{len(self.data) - self.pos} unparsed bytes at {self.pos}")


# --- exchanges -----------------------------------------------------------------------------

@dataclass
class Frame:
    direction: str  # ">" client to server, "<" server to client
    conn: str  # which connection (session) of the capture carried it
    data: bytes
    masks: list[tuple[int, int, str]]
    summary: str


@dataclass
class Exchange:
    name: str
    request: str  # human description of what the client asks
    response: str = ""
    notes: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    step: int = 0

    def sent(self, conn: "Conn", w: Writer, summary: str):
        self.frames.append(Frame(">", conn.name, w.frame(), w.masks, summary))

    def received(self, conn: "Conn", r: Reader):
        self.frames.append(Frame("<", conn.name, r.data, r.masks, " ".join(r.fields)))

    def connections(self) -> list[str]:
        return list(dict.fromkeys(f.conn for f in self.frames))

    def tag(self, f: Frame) -> str:
        """`>` / `<` on the main session's connection, else `>a`, `<new`, ..."""
        return f.direction + ("" if f.conn == "main" else f.conn)

    def render(self, server_version: str) -> str:
        out = [
            f"# golden exchange: {self.name}",
            f"# captured from Apache ZooKeeper {server_version} by tests/golden/capture.py",
            f"# step: {self.step} (capture order; connections: {', '.join(self.connections())})",
            f"# request: {self.request}",
        ]
        if self.response:
            out.append(f"# response: {self.response}")
        out += [f"# note: {n}" for n in self.notes]
        for f in self.frames:
            out.append(f"# {self.tag(f)} {f.summary}")
            out.append(f"{self.tag(f)} {f.data.hex()}")
            out += [f"~ {a}..{b} {label}" for a, b, label in f.masks]
        return "\n".join(out) + "\n"


class Conn:
    """One TCP connection speaking raw jute."""

    def __init__(self, addr: tuple[str, int], name: str):
        self.name = name
        self.sock = socket.create_connection(addr, timeout=IO_TIMEOUT)
        self.sock.settimeout(IO_TIMEOUT)
        self.xid = 0

    def next_xid(self) -> int:
        self.xid += 1
        return self.xid

    def send(self, frame: bytes):
        self.sock.sendall(frame)

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"server closed the connection ({len(buf)}/{n} bytes read)")
            buf += chunk
        return buf

    def recv(self) -> Reader:
        head = self._exact(4)
        (n,) = struct.unpack(">i", head)
        return Reader(head + self._exact(n))

    def at_eof(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def connect_request(read_only: bool | None) -> Writer:
    w = Writer()
    w.int(0)                    # protocolVersion
    w.long(0)                   # lastZxidSeen
    w.int(SESSION_TIMEOUT_MS)   # timeOut
    w.long(0)                   # sessionId: 0 = new session
    w.buffer(b"\x00" * 16)      # passwd
    if read_only is not None:
        w.bool(read_only)       # readOnly (absent for pre-3.3 clients)
    return w


def read_connect_response(r: Reader, with_read_only: bool):
    r.int("protocolVersion")
    r.int("timeOut")
    r.long("sessionId", "session")
    r.buffer("passwd", "passwd")
    if with_read_only:
        r.bool("readOnly")
    r.end()


def open_session(addr, name: str) -> Conn:
    c = Conn(addr, name)
    c.send(connect_request(False).frame())
    read_connect_response(c.recv(), True)
    return c


def request(conn: Conn, op: str, xid: int | None = None) -> tuple[Writer, int]:
    xid = conn.next_xid() if xid is None else xid
    return Writer().int(xid).int(OP[op]), xid


def create_body(w: Writer, path: str, data: bytes, flags: str, acl=WORLD_ANYONE, ttl=None):
    w.string(path).buffer(data).acls(acl).int(FLAGS[flags])
    if ttl is not None:
        w.long(ttl)
    return w


class Script:
    """The capture scenario; every exchange lands in `self.exchanges`."""

    def __init__(self, addr):
        self.addr = addr
        self.exchanges: dict[str, Exchange] = {}

    def ex(self, name: str, request_desc: str, response_desc: str = "", notes=()) -> Exchange:
        assert name not in self.exchanges, name
        e = Exchange(name, request_desc, response_desc, list(notes), step=len(self.exchanges) + 1)
        self.exchanges[name] = e
        return e

    def call(self, conn: Conn, e: Exchange, op: str, body=lambda w: w, decode=None,
             summary="", xid=None, expect_err=0):
        """Send one request, record it and its reply; returns the Reader."""
        w, xid = request(conn, op, xid)
        body(w)
        e.sent(conn, w, f"xid={xid} type={OP[op]} ({op}) {summary}".rstrip())
        conn.send(w.frame())
        r = conn.recv()
        rxid, _, err = r.reply_header()
        assert rxid == xid, f"{e.name}: reply xid {rxid} != {xid}"
        assert err == expect_err, f"{e.name}: err {err} ({ERR_NAME.get(err)}) != {expect_err}"
        if err == 0 and decode:
            decode(r)
        r.end()
        e.received(conn, r)
        return r

    def notification(self, conn: Conn, e: Exchange, event: str, path: str):
        r = conn.recv()
        xid, zxid, err = r.reply_header()
        assert (xid, err) == (NOTIFICATION_XID, 0), f"{e.name}: not a notification"
        etype = r.int("event.type")
        r.int("event.state")
        got = r.string("event.path")
        r.end()
        assert (EVENT_TYPE.get(etype), got) == (event, path), f"{e.name}: {etype} {got}"
        e.received(conn, r)

    def run(self):
        addr = self.addr

        # --- connecting -------------------------------------------------------------
        e = self.ex("connect", "ConnectRequest protocolVersion=0 lastZxidSeen=0 timeOut=30000 "
                    "sessionId=0 passwd=16 zero bytes readOnly=false",
                    "ConnectResponse protocolVersion=0 timeOut=30000 sessionId passwd(16) readOnly=false")
        c = Conn(addr, "new")
        w = connect_request(False)
        e.sent(c, w, "ConnectRequest (with readOnly byte)")
        c.send(w.frame())
        r = c.recv()
        read_connect_response(r, True)
        e.received(c, r)
        c.close()

        e = self.ex("connect_without_readonly",
                    "ConnectRequest as an old client sends it: no trailing readOnly byte",
                    "ConnectResponse without the readOnly byte (the server mirrors the client)")
        c = Conn(addr, "new")
        w = connect_request(None)
        e.sent(c, w, "ConnectRequest (no readOnly byte)")
        c.send(w.frame())
        r = c.recv()
        read_connect_response(r, False)
        e.received(c, r)
        c.close()

        s = open_session(addr, "main")  # the main session for the request/response exchanges

        # --- create ----------------------------------------------------------------
        self.call(s, self.ex("create_persistent",
                             "create /golden data=b'hello' acl=world:anyone:cdrwa mode=persistent",
                             "CreateResponse path='/golden'"),
                  "create", lambda w: create_body(w, "/golden", b"hello", "persistent"),
                  lambda r: r.string("path"), "CreateRequest")
        self.call(s, self.ex("create2_persistent",
                             "create2 /golden/c2 data=b'two' acl=world:anyone:cdrwa mode=persistent",
                             "Create2Response path + Stat"),
                  "create2", lambda w: create_body(w, "/golden/c2", b"two", "persistent"),
                  lambda r: (r.string("path"), r.stat()), "CreateRequest")
        self.call(s, self.ex("create_ephemeral_sequential",
                             "create /golden/seq- data=b'' acl=world:anyone:cdrwa "
                             "mode=ephemeral_sequential (flags 3)",
                             "CreateResponse path='/golden/seq-0000000001' (parent cversion was 1)"),
                  "create", lambda w: create_body(w, "/golden/seq-", b"", "ephemeral_sequential"),
                  lambda r: r.string("path"), "CreateRequest")
        self.call(s, self.ex("create_ttl",
                             "createTTL /golden/ttl data=b'ttl' acl=world:anyone:cdrwa "
                             "mode=persistent_with_ttl (flags 5) ttl=60000",
                             "Create2Response path + Stat",
                             ["needs extendedTypesEnabled=true"]),
                  "createTTL",
                  lambda w: create_body(w, "/golden/ttl", b"ttl", "persistent_with_ttl", ttl=60000),
                  lambda r: (r.string("path"), r.stat()), "CreateTTLRequest")
        self.call(s, self.ex("create_container",
                             "createContainer /golden/box data=b'' acl=world:anyone:cdrwa "
                             "mode=container (flags 4)",
                             "Create2Response path + Stat"),
                  "createContainer", lambda w: create_body(w, "/golden/box", b"", "container"),
                  lambda r: (r.string("path"), r.stat()), "CreateRequest")
        self.call(s, self.ex("exists_ttl_node", "exists /golden/ttl watch=false",
                             "ExistsResponse Stat of the TTL node"),
                  "exists", lambda w: w.string("/golden/ttl").bool(False),
                  lambda r: r.stat(), "ExistsRequest")
        self.call(s, self.ex("exists_container_node", "exists /golden/box watch=false",
                             "ExistsResponse Stat of the container node"),
                  "exists", lambda w: w.string("/golden/box").bool(False),
                  lambda r: r.stat(), "ExistsRequest")
        self.call(s, self.ex("create_error_node_exists",
                             "create /golden again",
                             "reply header only, err=-110 (NodeExists), no body"),
                  "create", lambda w: create_body(w, "/golden", b"again", "persistent"),
                  summary="CreateRequest", expect_err=-110)
        self.call(s, self.ex("create_error_no_parent",
                             "create /missing/child (parent does not exist)",
                             "reply header only, err=-101 (NoNode), no body"),
                  "create", lambda w: create_body(w, "/missing/child", b"", "persistent"),
                  summary="CreateRequest", expect_err=-101)

        # --- read and write data --------------------------------------------------------
        self.call(s, self.ex("get_data", "getData /golden watch=false",
                             "GetDataResponse data=b'hello' + Stat"),
                  "getData", lambda w: w.string("/golden").bool(False),
                  lambda r: (r.buffer("data"), r.stat()), "GetDataRequest")
        self.call(s, self.ex("get_data_error_no_node", "getData /missing watch=false",
                             "reply header only, err=-101 (NoNode), no body"),
                  "getData", lambda w: w.string("/missing").bool(False),
                  summary="GetDataRequest", expect_err=-101)
        self.call(s, self.ex("set_data", "setData /golden data=b'world' version=0",
                             "SetDataResponse Stat (version 1)"),
                  "setData", lambda w: w.string("/golden").buffer(b"world").int(0),
                  lambda r: r.stat(), "SetDataRequest")
        self.call(s, self.ex("set_data_error_bad_version", "setData /golden data=b'x' version=7",
                             "reply header only, err=-103 (BadVersion), no body"),
                  "setData", lambda w: w.string("/golden").buffer(b"x").int(7),
                  summary="SetDataRequest", expect_err=-103)
        self.call(s, self.ex("exists", "exists /golden watch=false", "ExistsResponse Stat"),
                  "exists", lambda w: w.string("/golden").bool(False),
                  lambda r: r.stat(), "ExistsRequest")
        self.call(s, self.ex("exists_missing_node", "exists /missing watch=false",
                             "reply header only, err=-101 (NoNode), no body"),
                  "exists", lambda w: w.string("/missing").bool(False),
                  summary="ExistsRequest", expect_err=-101)

        # --- children, ACL, sync --------------------------------------------------------
        self.call(s, self.ex("get_children", "getChildren /golden/c2 watch=false (no children)",
                             "GetChildrenResponse children=[]"),
                  "getChildren", lambda w: w.string("/golden/c2").bool(False),
                  lambda r: r.strings("children"), "GetChildrenRequest")
        create_body_kid = lambda w: create_body(w, "/golden/c2/kid", b"", "persistent")  # noqa: E731
        self.call(s, self.ex("create_child", "create /golden/c2/kid data=b'' persistent",
                             "CreateResponse path='/golden/c2/kid'"),
                  "create", create_body_kid, lambda r: r.string("path"), "CreateRequest")
        self.call(s, self.ex("get_children2", "getChildren2 /golden/c2 watch=false (one child)",
                             "GetChildren2Response children=['kid'] + Stat of /golden/c2"),
                  "getChildren2", lambda w: w.string("/golden/c2").bool(False),
                  lambda r: (r.strings("children"), r.stat()), "GetChildren2Request")
        self.call(s, self.ex("get_all_children_number", "getAllChildrenNumber /golden",
                             "GetAllChildrenNumberResponse totalNumber (all descendants)"),
                  "getAllChildrenNumber", lambda w: w.string("/golden"),
                  lambda r: r.int("totalNumber"), "GetAllChildrenNumberRequest")
        self.call(s, self.ex("get_ephemerals", "getEphemerals prefixPath=/golden",
                             "GetEphemeralsResponse ephemerals of this session under the prefix"),
                  "getEphemerals", lambda w: w.string("/golden"),
                  lambda r: r.strings("ephemerals"), "GetEphemeralsRequest")
        self.call(s, self.ex("get_acl", "getACL /golden",
                             "GetACLResponse acl=[world:anyone:cdrwa] + Stat"),
                  "getACL", lambda w: w.string("/golden"),
                  lambda r: (r.acls(), r.stat()), "GetACLRequest")
        self.call(s, self.ex("sync", "sync /golden", "SyncResponse path='/golden'"),
                  "sync", lambda w: w.string("/golden"), lambda r: r.string("path"),
                  "SyncRequest")

        # --- delete --------------------------------------------------------------------
        self.call(s, self.ex("delete_error_not_empty", "delete /golden version=-1 (has children)",
                             "reply header only, err=-111 (NotEmpty), no body"),
                  "delete", lambda w: w.string("/golden").int(-1),
                  summary="DeleteRequest", expect_err=-111)
        self.call(s, self.ex("delete", "delete /golden/c2/kid version=-1",
                             "reply header only, err=0, no body"),
                  "delete", lambda w: w.string("/golden/c2/kid").int(-1),
                  summary="DeleteRequest")

        # --- multi -----------------------------------------------------------------
        def multi(ops):
            def body(w: Writer):
                for op, fill in ops:
                    w.int(OP[op]).bool(False).int(-1)  # MultiHeader type done err
                    fill(w)
                w.int(-1).bool(True).int(-1)           # end marker
            return body

        def multi_results(r: Reader):
            while True:
                t = r.int("mh.type")
                done = r.bool("mh.done")
                r.int("mh.err")
                if done:
                    assert t == -1
                    return
                if t == OP["create"]:
                    r.string("path")
                elif t in (OP["create2"], OP["createTTL"], OP["createContainer"]):
                    r.string("path")
                    r.stat()
                elif t == OP["setData"]:
                    r.stat()
                elif t == OP["error"]:
                    r.int("err")

        self.call(s, self.ex("multi_success",
                             "multi [create /golden/m data=b'm' persistent, setData /golden/m "
                             "data=b'm2' version=0, check /golden/m version=1, delete /golden/m "
                             "version=1]",
                             "MultiResponse [CreateResponse, SetDataResponse Stat, check (no body), "
                             "delete (no body)], end marker (type -1, done true, err -1)",
                             ["each op: MultiHeader(type int, done bool=false, err int=-1) + "
                              "op record; list ends with MultiHeader(-1, true, -1)"]),
                  "multi", multi([
                      ("create", lambda w: create_body(w, "/golden/m", b"m", "persistent")),
                      ("setData", lambda w: w.string("/golden/m").buffer(b"m2").int(0)),
                      ("check", lambda w: w.string("/golden/m").int(1)),
                      ("delete", lambda w: w.string("/golden/m").int(1)),
                  ]), multi_results, "MultiRequest")
        self.call(s, self.ex("multi_failure",
                             "multi [create /golden/m1 persistent, check /golden version=99 "
                             "(wrong), create /golden/m2 persistent]",
                             "MultiResponse of ErrorResults: ops before the failure err=0, the "
                             "failing op err=-103 (BadVersion), ops after it err=-2 "
                             "(RuntimeInconsistency); nothing applied",
                             ["the reply header carries err=0: the per-op codes are in the body"]),
                  "multi", multi([
                      ("create", lambda w: create_body(w, "/golden/m1", b"", "persistent")),
                      ("check", lambda w: w.string("/golden").int(99)),
                      ("create", lambda w: create_body(w, "/golden/m2", b"", "persistent")),
                  ]), multi_results, "MultiRequest")

        # --- ping, auth -------------------------------------------------------------
        self.call(s, self.ex("ping", "ping (xid -2, type 11, no body)",
                             "reply header xid=-2 zxid=last zxid err=0, no body"),
                  "ping", xid=PING_XID)
        self.call(s, self.ex("auth_digest",
                             "auth (xid -4, type 100) AuthPacket type=0 scheme='digest' "
                             "auth=b'golden:secret'",
                             "reply header xid=-4 err=0, no body"),
                  "auth", lambda w: w.int(0).string("digest").buffer(b"golden:secret"),
                  summary="AuthPacket", xid=AUTH_XID)

        # --- watches: session `a` watches, session `b` writes ------------------------------
        a, b = open_session(addr, "a"), open_session(addr, "b")  # a watches, b writes

        e = self.ex("watch_node_created",
                    "session a: exists /golden/w watch=true (missing); session b creates it",
                    "NoNode reply, later a notification: WatcherEvent type=1 (NodeCreated) "
                    "state=3 (SyncConnected) path='/golden/w'",
                    ["notification header: xid=-1 zxid=-1 err=0"])
        self.call(a, e, "exists", lambda w: w.string("/golden/w").bool(True),
                  summary="ExistsRequest", expect_err=-101)
        self.call(b, e, "create", lambda w: create_body(w, "/golden/w", b"", "persistent"),
                  lambda r: r.string("path"))
        self.notification(a, e, "NodeCreated", "/golden/w")

        e = self.ex("watch_node_data_changed",
                    "session a: getData /golden/w watch=true; session b sets its data",
                    "GetDataResponse, later WatcherEvent type=3 (NodeDataChanged) path='/golden/w'")
        self.call(a, e, "getData", lambda w: w.string("/golden/w").bool(True),
                  lambda r: (r.buffer("data"), r.stat()), "GetDataRequest")
        self.call(b, e, "setData", lambda w: w.string("/golden/w").buffer(b"new").int(-1),
                  lambda r: r.stat())
        self.notification(a, e, "NodeDataChanged", "/golden/w")

        e = self.ex("watch_node_children_changed",
                    "session a: getChildren2 /golden/w watch=true; session b creates a child",
                    "GetChildren2Response, later WatcherEvent type=4 (NodeChildrenChanged) "
                    "path='/golden/w'")
        self.call(a, e, "getChildren2", lambda w: w.string("/golden/w").bool(True),
                  lambda r: (r.strings("children"), r.stat()), "GetChildren2Request")
        self.call(b, e, "create", lambda w: create_body(w, "/golden/w/kid", b"", "persistent"),
                  lambda r: r.string("path"))
        self.notification(a, e, "NodeChildrenChanged", "/golden/w")

        e = self.ex("watch_node_deleted",
                    "session a: exists /golden/w/kid watch=true; session b deletes it",
                    "ExistsResponse Stat, later WatcherEvent type=2 (NodeDeleted) "
                    "path='/golden/w/kid'")
        self.call(a, e, "exists", lambda w: w.string("/golden/w/kid").bool(True),
                  lambda r: r.stat(), "ExistsRequest")
        self.call(b, e, "delete", lambda w: w.string("/golden/w/kid").int(-1))
        self.notification(a, e, "NodeDeleted", "/golden/w/kid")

        e = self.ex("add_watch_persistent_recursive",
                    "session a: addWatch /golden/tree mode=1 (persistent recursive); session b then "
                    "creates /golden/tree and /golden/tree/leaf",
                    "reply header + ErrorResponse err=0 (a 4-byte body), then one NodeCreated "
                    "notification per created node (the watch stays)",
                    ["AddWatchRequest: path string, mode int (0 persistent, 1 persistent "
                     "recursive)"])
        self.call(a, e, "addWatch",
                  lambda w: w.string("/golden/tree").int(ADD_WATCH_MODE["persistent_recursive"]),
                  lambda r: r.int("ErrorResponse.err"), "AddWatchRequest")
        self.call(b, e, "create", lambda w: create_body(w, "/golden/tree", b"", "persistent"),
                  lambda r: r.string("path"))
        self.notification(a, e, "NodeCreated", "/golden/tree")
        self.call(b, e, "create",
                  lambda w: create_body(w, "/golden/tree/leaf", b"", "persistent"),
                  lambda r: r.string("path"))
        self.notification(a, e, "NodeCreated", "/golden/tree/leaf")

        # --- setWatches (what a client sends after reconnecting) ------------------------
        c = open_session(addr, "c")
        w = request(c, "ping", PING_XID)[0]  # learn the current zxid from a ping reply
        c.send(w.frame())
        _, current_zxid, _ = c.recv().reply_header()
        e = self.ex("set_watches",
                    "setWatches (xid -8, type 101) relativeZxid=<last zxid seen> "
                    "dataWatches=['/golden/w'] existWatches=['/golden/absent'] "
                    "childWatches=['/golden/w']",
                    "reply header xid=-8 err=0, no body: nothing changed after relativeZxid")
        self.call(c, e, "setWatches",
                  lambda w: w.long(current_zxid, vary="zxid").strings(["/golden/w"])
                  .strings(["/golden/absent"]).strings(["/golden/w"]),
                  summary="SetWatches", xid=SET_WATCHES_XID)
        e = self.ex("set_watches_stale",
                    "setWatches relativeZxid=0 dataWatches=['/golden/w'] existWatches=[] "
                    "childWatches=[] on a fresh session",
                    "first a NodeDataChanged notification for /golden/w (it changed after "
                    "zxid 0), then the reply header xid=-8",
                    ["the server fires missed watches before it replies"])
        d = open_session(addr, "d")
        w = Writer().int(SET_WATCHES_XID).int(OP["setWatches"])
        w.long(0).strings(["/golden/w"]).strings([]).strings([])
        e.sent(d, w, f"xid={SET_WATCHES_XID} type=101 (setWatches) SetWatches")
        d.send(w.frame())
        self.notification(d, e, "NodeDataChanged", "/golden/w")
        r = d.recv()
        assert r.reply_header()[0] == SET_WATCHES_XID
        r.end()
        e.received(d, r)

        # --- closeSession -------------------------------------------------------------
        e = self.ex("close_session", "closeSession (type -11, no body)",
                    "reply header err=0, no body; then the server closes the connection",
                    ["the session's ephemeral /golden/seq-0000000001 is deleted"])
        self.call(s, e, "closeSession", summary="")
        assert s.at_eof(), "server kept the connection open after closeSession"
        for conn in (s, a, b, c, d):
            conn.close()
        return self.exchanges


def server_version(addr) -> str:
    srvr = four_letter_word(addr[0], addr[1], "srvr")
    for line in srvr.splitlines():
        if line.startswith("Zookeeper version:"):
            version = line.split(":", 1)[1].split(",")[0].strip()
            # Debian's build leaves an unexpanded "-${mvngit.commit.id}" suffix.
            return version.split("-${")[0]
    return "unknown"


def covered(i: int, masks) -> bool:
    return any(a <= i < b for a, b, _ in masks)


def verify_same_but_masked(first: dict, second: dict):
    """Every byte that differs between two captures must be masked."""
    problems = []
    for name, e1 in first.items():
        e2 = second[name]
        if len(e1.frames) != len(e2.frames):
            problems.append(f"{name}: {len(e1.frames)} vs {len(e2.frames)} frames")
            continue
        for k, (f1, f2) in enumerate(zip(e1.frames, e2.frames)):
            if len(f1.data) != len(f2.data):
                problems.append(f"{name} frame {k}: length {len(f1.data)} vs {len(f2.data)}")
                continue
            if f1.masks != f2.masks:
                problems.append(f"{name} frame {k}: different masks")
            bad = [i for i in range(len(f1.data))
                   if f1.data[i] != f2.data[i] and not covered(i, f1.masks)]
            if bad:
                problems.append(f"{name} frame {k}: unmasked bytes differ at {bad}")
    if problems:
        raise SystemExit("capture is not reproducible:\n  " + "\n  ".join(problems))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE, help="directory for the .hex files")
    ap.add_argument("--connect", metavar="HOST:PORT",
                    help="use this running ZooKeeper (fresh tree expected) instead of starting two")
    ap.add_argument("--check", action="store_true",
                    help="do not write: fail if the files differ from a new capture outside masks")
    args = ap.parse_args()

    if args.connect:
        host, port = args.connect.rsplit(":", 1)
        addr = (host, int(port))
        version = server_version(addr)
        exchanges = Script(addr).run()
    else:
        runs = []
        for _ in range(2):
            with start_server("zookeeper") as srv:
                addr = (srv.host, srv.port)
                version = server_version(addr)
                runs.append(Script(addr).run())
        verify_same_but_masked(runs[0], runs[1])
        exchanges = runs[0]

    if args.check:
        failures = []
        for name, e in exchanges.items():
            path = args.out / f"{name}.hex"
            if not path.exists():
                failures.append(f"{path} is missing")
                continue
            old = [line for line in path.read_text().splitlines() if line[:1] in "<>"]
            new = [f"{e.tag(f)} {f.data.hex()}" for f in e.frames]
            if len(old) != len(new):
                failures.append(f"{path}: {len(old)} frames on file, {len(new)} captured")
                continue
            for k, (o, n, f) in enumerate(zip(old, new, e.frames)):
                (otag, ohex), (ntag, nhex) = o.split(" ", 1), n.split(" ", 1)
                ob, nb = bytes.fromhex(ohex), bytes.fromhex(nhex)
                if otag != ntag or len(ob) != len(nb) or any(
                        ob[i] != nb[i] and not covered(i, f.masks) for i in range(len(ob))):
                    failures.append(f"{path} frame {k} differs")
        if failures:
            print("\n".join(failures), file=sys.stderr)
            return 1
        print(f"{len(exchanges)} golden exchanges match Apache ZooKeeper {version}")
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    for name, e in exchanges.items():
        (args.out / f"{name}.hex").write_text(e.render(version))
    print(f"wrote {len(exchanges)} exchanges to {args.out} (Apache ZooKeeper {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
