"""A minimal MessagePack decoder (the subset recipes return).

A recipe's result is JSON in its call node, but a structure that holds
binary data (a semaphore's holders, a group's members) arrives as `0x` and
the hex of its MessagePack encoding (docs/RECIPES.md, "Calling from any
client", Result): this decodes it without another dependency."""

from __future__ import annotations

import struct


def unpackb(data: bytes):
    value, end = _decode(data, 0)
    if end != len(data):
        raise ValueError(f"{len(data) - end} bytes after the MessagePack value")
    return value


def _decode(b: bytes, i: int):
    t = b[i]
    i += 1
    if t <= 0x7F:
        return t, i
    if t >= 0xE0:
        return t - 0x100, i
    if 0x80 <= t <= 0x8F:
        return _map(b, i, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _array(b, i, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[i:i + n].decode("utf-8"), i + n
    if t == 0xC0:
        return None, i
    if t == 0xC2:
        return False, i
    if t == 0xC3:
        return True, i
    if t in (0xC4, 0xC5, 0xC6):  # bin 8/16/32
        n, i = _length(b, i, t - 0xC4)
        return bytes(b[i:i + n]), i + n
    if t == 0xCA:
        return struct.unpack_from(">f", b, i)[0], i + 4
    if t == 0xCB:
        return struct.unpack_from(">d", b, i)[0], i + 8
    ints = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
            0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
    if t in ints:
        fmt = ints[t]
        return struct.unpack_from(fmt, b, i)[0], i + struct.calcsize(fmt)
    if t in (0xD9, 0xDA, 0xDB):  # str 8/16/32
        n, i = _length(b, i, t - 0xD9)
        return b[i:i + n].decode("utf-8"), i + n
    if t in (0xDC, 0xDD):
        n, i = _length(b, i, t - 0xDC + 1)
        return _array(b, i, n)
    if t in (0xDE, 0xDF):
        n, i = _length(b, i, t - 0xDE + 1)
        return _map(b, i, n)
    raise ValueError(f"unsupported MessagePack type 0x{t:02x}")


def _length(b: bytes, i: int, width: int):
    fmt = (">B", ">H", ">I")[width]
    return struct.unpack_from(fmt, b, i)[0], i + struct.calcsize(fmt)


def _array(b: bytes, i: int, n: int):
    out = []
    for _ in range(n):
        v, i = _decode(b, i)
        out.append(v)
    return out, i


def _map(b: bytes, i: int, n: int):
    out = {}
    for _ in range(n):
        k, i = _decode(b, i)
        v, i = _decode(b, i)
        out[k] = v
    return out, i
