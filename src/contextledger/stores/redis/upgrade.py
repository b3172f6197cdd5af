"""Bringing data written by an earlier version of the Redis store up to this one's layout.

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData`; ``contextledger db upgrade`` runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import cast

from contextledger.errors import CorruptRecord
from contextledger.stores.base import EvictedCandidate
from contextledger.stores.redis import eviction_index, listing, paging, summary_index
from contextledger.stores.redis.codec import flat_hash, loads, reduction_from, summary_from, text
from contextledger.stores.redis.data import RedisData
from contextledger.stores.redis.keys import ConversationKeys

__all__ = ["RedisUpgrade"]

Scored = Callable[[Iterable[tuple[bytes, bytes]], str], Iterator[list[str]]]
"""The ARGV chunks of :data:`~.paging.REINDEX` for a hash's (field, value) pairs; the second argument names the key."""

logger = logging.getLogger("contextledger.stores.redis.store")

_ATTEMPTS = 3
"""Times an eviction index is planned again when a commit moved the conversation meanwhile."""


def _seq(raw: bytes, message_id: str, where: str) -> int:
    """The seq of a stored message record.

    Raises:
        CorruptRecord: The record holds no readable seq.
    """
    try:
        return int(loads(raw)["seq"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecord(f"damaged message: {exc}", where=where, record_id=message_id) from exc


class RedisUpgrade:
    """Layout upgrades: the seq index of history, the creation-time index of summaries, list order marks, evictions."""

    def __init__(self, data: RedisData) -> None:
        """Work on ``data``."""
        self._d = data

    def upgrade(self) -> int:
        """Bring data written by an earlier version up to this one's layout; how many conversations changed.

        Today that is the seq index of history (see :mod:`~contextledger.stores.redis.paging`):
        every conversation whose index lacks a message gets it; the same for its summaries'
        creation-time index (see :mod:`~contextledger.stores.redis.summary_index`); the order marks of its
        reductions and pin events lists (see :mod:`~contextledger.stores.redis.listing`); and its index of
        standing evictions where it is not marked complete (see :mod:`~contextledger.stores.redis.eviction_index`).
        Idempotent, safe while others
        write (each id is added only while its message exists); run once after upgrading
        the library (``contextledger db upgrade`` does). Until then such a conversation's
        history pages are read whole.

        Raises:
            CorruptRecord: A message record holds no readable ``seq``, or a summary no readable
                ``created_at`` (the key and id are named).
        """
        pattern, suffix = ConversationKeys.stems(self._d.key_prefix)
        changed = 0
        with self._d.driver("upgrade"):
            for raw in self._d.client.scan_iter(match=pattern, count=1000):
                stem = text(raw).removesuffix(suffix)
                if not ConversationKeys.owns(self._d.key_prefix, stem):
                    continue
                keys = ConversationKeys.at(stem)
                done = self._reindex(keys) + self._index_summaries(keys) + self._mark_lists(keys)
                if self._index_evictions(keys) + done:
                    changed += 1
        logger.info("prefix=<%s>, conversations=<%d> | indexed history by seq", self._d.key_prefix, changed)
        return changed

    def _mark_lists(self, keys: ConversationKeys) -> int:
        """Mark the order of a conversation's reductions and pin events lists (see :mod:`.listing`); how many."""
        marked = 0
        for kind, key in ((listing.REDUCTIONS, keys.red), (listing.PINS, keys.pins)):
            pipe = self._d.client.pipeline(transaction=False)
            pipe.hmget(keys.state, [kind.mark, kind.unordered])
            pipe.lrange(key, 0, -1)
            (mark, unordered), rows = pipe.execute()
            if mark is not None or unordered is not None or not rows:
                continue
            at, ordered = listing.order_mark(kind, rows, key)
            args = [kind.mark, kind.unordered, str(len(rows)), str(at), "1" if ordered else "0", kind.length]
            done = int(cast(int, self._d.scripts.mark(keys=[keys.state, key], args=args)))
            if done < 0:
                logger.info("list=<%s> | written while being marked; the next upgrade marks it", key)
            marked += max(done, 0)
        return marked

    def _index_evictions(self, keys: ConversationKeys) -> int:
        """Rebuild a conversation's index of standing evictions unless it is complete (see :mod:`.eviction_index`).

        Reads the conversation whole (one script), plans the index as the whole read lists
        the evictions, and writes it in chunks that each check the version is still the one
        read (a commit in between: planned again, a few times). Returns 1 if it was rebuilt;
        one holding a time a score cannot hold is left as it is (its pages are read whole).
        """
        for _ in range(_ATTEMPTS):
            state_raw, records, mut_raw, sums, reds = self._d.snapshot(
                [keys.state, keys.msg, keys.mut, keys.sum, keys.red], ["h", "h", "h", "h", "l"]
            )
            state = flat_hash(state_raw)
            version = state.get("version")
            if version is None or (state.get("ev_v") == version and state.get("et_v") == version):
                return 0
            mut = flat_hash(mut_raw)
            candidates = [
                EvictedCandidate(mid, "message", _seq(raw, mid, keys.msg), "", "", text(mut[f"e|{mid}"]))
                for mid, raw in flat_hash(records).items()
                if f"e|{mid}" in mut
            ]
            summaries = [summary_from(raw, mut, keys.sum) for raw in flat_hash(sums).values()]
            candidates += [
                EvictedCandidate(s.summary_id, "summary", s.seq, "", "", s.evicted_by)
                for s in summaries
                if s.evicted_by is not None
            ]
            planned = eviction_index.plan(candidates, [reduction_from(raw, keys.red) for raw in reds], summaries)
            if not planned.complete:
                return 0  # a time a score cannot hold: its pages stay read whole
            fields = set(planned.fields[::2])
            drop = [f for f in mut if f.startswith(("rb|", "rp|", "rt|")) and f not in fields]
            if self._fill_evictions(keys, text(version), planned, drop):
                return 1
        logger.info("key=<%s> | written while its evictions were indexed; the next upgrade indexes them", keys.state)
        return 0

    def _fill_evictions(
        self, keys: ConversationKeys, version: str, planned: eviction_index.Plan, drop: list[str]
    ) -> bool:
        """Write ``planned`` in chunks; false if the version moved (nothing of it then marks the index complete)."""
        step = 2 * paging.REINDEX_CHUNK
        starts = list(range(0, len(planned.pairs), step)) or [0]
        for n, start in enumerate(starts):
            first, last = n == 0, n == len(starts) - 1
            pairs, lex = planned.pairs[start : start + step], planned.lex[start : start + step]
            args = [version, "1" if first else "0", "1" if last and planned.complete else "0", str(len(pairs) // 2)]
            args += [*pairs, str(len(lex) // 2), *lex]
            fields = planned.fields if first else []
            args += [str(len(fields) // 2), *fields, *(drop if first else [])]
            done = int(
                cast(int, self._d.scripts.eviction_fill(keys=[keys.state, keys.mut, keys.evat, keys.evtr], args=args))
            )
            if done < 0:
                return False
        return True

    def _reindex(self, keys: ConversationKeys) -> int:
        """Make a conversation's seq index hold exactly its messages (scripts of a chunk each); how many changed."""
        return self._fill(keys, keys.msg, keys.seq, paging.reindex_args)

    def _index_summaries(self, keys: ConversationKeys) -> int:
        """Make a conversation's summaries' creation-time index hold its summaries; how many changed."""
        return self._fill(keys, keys.sum, keys.sumat, summary_index.reindex_args)

    def _fill(self, keys: ConversationKeys, rows: str, index: str, scored: Scored) -> int:
        """Make the sorted set ``index`` hold the fields of the hash ``rows``, scored by ``scored``.

        The scripts add a member only where they add its row, so the index is a subset:
        equal sizes mean equal sets. Otherwise each row is added while it exists, and
        members whose row is gone (pruned by a version without the index) are dropped.
        """
        pipe = self._d.client.pipeline(transaction=False)
        pipe.zcard(index)
        pipe.hlen(rows)
        indexed, stored = pipe.execute()
        if int(indexed) == int(stored):
            return 0
        records = cast(Iterator[tuple[bytes, bytes]], self._d.client.hscan_iter(rows, count=paging.REINDEX_CHUNK))
        changed = 0
        for args in scored(records, rows):
            changed += int(cast(int, self._d.scripts.reindex(keys=[keys.state, rows, index], args=args)))
        if int(self._d.client.zcard(index)) > int(self._d.client.hlen(rows)):
            members = [text(m) for m, _ in self._d.client.zscan_iter(index, count=paging.REINDEX_CHUNK)]
            for start in range(0, len(members), paging.REINDEX_CHUNK):
                chunk = members[start : start + paging.REINDEX_CHUNK]
                changed += int(cast(int, self._d.scripts.unstray(keys=[rows, index], args=chunk)))
        return changed
