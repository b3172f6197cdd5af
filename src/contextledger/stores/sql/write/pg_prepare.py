"""When a statement sent with psycopg's low-level API is prepared on the server: psycopg's own rule.

The held connection's send (:mod:`~contextledger.stores.sql.write.pg_direct`) and the
async API's native send (:mod:`~contextledger.stores.sql.write.pg_wire`) send their
statements without a cursor, so they keep what a cursor would keep: a statement (its
text and parameter types) is prepared at its use after ``prepare_threshold`` uses sent
as text (``0``: at its first; ``None``: never), at most ``prepared_max`` statements
per connection (``None``: no limit).
"""

from __future__ import annotations

import sys

__all__ = ["Key", "PreparedStatements"]

Key = tuple[str, tuple[int, ...]]
"""A statement as psycopg tells them apart: its text and its parameters' type oids."""


class PreparedStatements:
    """One connection's prepared statements and the uses of those not prepared yet."""

    __slots__ = ("counts", "max", "prefix", "prepared", "threshold")

    def __init__(self, threshold: int | None, prepared_max: int | None, *, prefix: bytes) -> None:
        """The rule of a connection's ``prepare_threshold`` and ``prepared_max``; names start with ``prefix``."""
        self.threshold = threshold
        self.max = prepared_max if prepared_max is not None else sys.maxsize
        self.prefix = prefix
        self.prepared: dict[Key, bytes] = {}
        self.counts: dict[Key, int] = {}

    def name(self, key: Key) -> bytes | None:
        """The name to prepare ``key`` under now, or ``None``: send its text (one more use towards the threshold).

        The caller records the name in :attr:`prepared` once the server prepared it.
        """
        if self.threshold is None or len(self.prepared) >= self.max:
            return None
        seen = self.counts.get(key, 0)
        if seen < self.threshold:
            self.counts[key] = seen + 1
            return None
        self.counts.pop(key, None)
        return b"%s%d" % (self.prefix, len(self.prepared))
