"""Reading what a store holds at rest, byte for byte, to search it for what must not be there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextledger.stores.capabilities import CompleteStore


def redis_dump(store: CompleteStore) -> bytes:
    """Every value of every key of the store's server (or every node of its cluster), read as it is."""
    client: Any = getattr(store, "_data").client  # noqa: B009 - the test reads the server the store writes
    out: list[bytes] = []
    for key in client.scan_iter(match="*"):
        kind = client.type(key)
        if kind == b"hash":
            out += [b for pair in client.hgetall(key).items() for b in pair]
        elif kind == b"list":
            out += client.lrange(key, 0, -1)
        elif kind == b"zset":
            out += client.zrange(key, 0, -1)
        elif kind == b"set":
            out += list(client.smembers(key))
        elif kind == b"string":
            out.append(client.get(key))
        out.append(key)
    return b"\n".join(out)


def files(folder: Path) -> bytes:
    """The bytes of every file in ``folder`` (a SQLite database, its WAL and shared memory)."""
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())
