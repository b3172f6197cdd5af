"""Bringing data written by an earlier version of the Redis store up to this one's layout.

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData`; ``contextledger db upgrade`` runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import cast

from contextledger.stores.redis import listing, paging, summary_index
from contextledger.stores.redis.codec import text
from contextledger.stores.redis.data import RedisData
from contextledger.stores.redis.keys import ConversationKeys

__all__ = ["RedisUpgrade"]

Scored = Callable[[Iterable[tuple[bytes, bytes]], str], Iterator[list[str]]]
"""The ARGV chunks of :data:`~.paging.REINDEX` for a hash's (field, value) pairs; the second argument names the key."""

logger = logging.getLogger("contextledger.stores.redis.store")


class RedisUpgrade:
    """Layout upgrades (today: the seq index of history, the creation-time index of summaries, list order marks)."""

    def __init__(self, data: RedisData) -> None:
        """Work on ``data``."""
        self._d = data

    def upgrade(self) -> int:
        """Bring data written by an earlier version up to this one's layout; how many conversations changed.

        Today that is the seq index of history (see :mod:`~contextledger.stores.redis.paging`):
        every conversation whose index lacks a message gets it; the same for its summaries'
        creation-time index (see :mod:`~contextledger.stores.redis.summary_index`); and the order marks of its
        reductions and pin events lists (see :mod:`~contextledger.stores.redis.listing`). Idempotent, safe while others
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
                if self._reindex(keys) + self._index_summaries(keys) + self._mark_lists(keys):
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
