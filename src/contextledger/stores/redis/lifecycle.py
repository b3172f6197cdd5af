"""The Redis store's lifecycle of entries: erasure, pruning, tombstones, resealing, erased bytes.

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData`. Erase, prune and reseal each read
what they change, then apply it in one script that checks it is unchanged (the scripts
are in :mod:`~contextledger.stores.redis.erasure` and :mod:`~contextledger.stores.redis.lineage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from contextledger.errors import EntryNotFound
from contextledger.model.messages import Message
from contextledger.model.records import SummaryEntry, Tombstone
from contextledger.stores.capabilities import Swap
from contextledger.stores.redis import erasure, eviction_index
from contextledger.stores.redis.codec import flat_hash, loads, revision_from, text
from contextledger.stores.redis.data import RedisData, script_errors
from contextledger.stores.redis.keys import ConversationKeys

__all__ = ["RedisLifecycle"]


class RedisLifecycle:
    """The ERASURE, RESEAL and SETTLE_ERASURE parts of the store contract."""

    def __init__(self, data: RedisData) -> None:
        """Work on ``data``."""
        self._d = data

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Overwrite an entry, delete its revisions, rewrite ``summaries``, keep ``tombstone``: one script.

        The old values leave the keys (Redis keeps no old versions); persistence files
        written before (RDB snapshots, AOF) hold them until they are rewritten.

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
            ConcurrencyConflict: Its revisions moved while the erase was prepared (retry).
        """
        keys = self._d.conversation(tombstone.session_id, tombstone.agent_id)
        entry_id = tombstone.entry_id
        with self._d.driver("erase"):
            record = self._d.client.hget(keys.msg, entry_id)
            revisions = cast(list[bytes], self._d.client.lrange(keys.rev, 0, -1))
            stored = cast(list[bytes | None], self._d.client.hmget(keys.sum, list(summaries))) if summaries else []
        if record is None:
            raise EntryNotFound(f"no message {entry_id} in this conversation")
        if any(raw is None for raw in stored):
            raise EntryNotFound("a summary to redact is not in this conversation")
        positions = [i for i, raw in enumerate(revisions) if revision_from(raw, keys.rev).message_id == entry_id]
        rewritten = {
            summary_id: SummaryEntry.model_validate_json(raw).model_copy(update={"content": summaries[summary_id]})
            for summary_id, raw in zip(summaries, stored, strict=True)
            if raw is not None
        }
        args = erasure.erase_args(entry_id, loads(record), erased, tombstone, positions, rewritten)
        with self._d.driver("erase"), script_errors():
            self._d.scripts.erase(keys=[keys.msg, keys.content, keys.mut, keys.rev, keys.sum, keys.state], args=args)
        self._align_ttl(keys)

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries among ``entry_ids`` (never an active one) in one script."""
        keys = self._d.conversation(session_id, agent_id)
        wanted = set(entry_ids)
        with self._d.driver("prune"):
            read_at = self._d.client.hget(keys.state, "version")
            revisions = cast(list[bytes], self._d.client.lrange(keys.rev, 0, -1))
            records = dict(zip(sorted(wanted), self._d.client.hmget(keys.msg, sorted(wanted)), strict=True))
            messages = [i for i, known in records.items() if known]
            summaries = sorted(wanted - set(messages))
            stored = cast(list[bytes | None], self._d.client.hmget(keys.sum, summaries)) if summaries else []
        # the eviction index members of what may go, and what the summaries replaced (see eviction_index.py)
        members: list[str] = []
        for i in messages:
            members += [i, eviction_index.member(int(loads(cast(bytes, records[i]))["seq"]), "message", i)]
        replaced: list[str] = []
        for sid, raw in zip(summaries, stored, strict=True):
            if raw is not None:
                summary = SummaryEntry.model_validate_json(raw)
                members += [sid, eviction_index.member(summary.seq, "summary", sid)]
                replaced += [sid, str(len(summary.replaces)), *summary.replaces]
        positions = [i for i, raw in enumerate(revisions) if revision_from(raw, keys.rev).message_id in set(messages)]
        args = [str(len(messages)), *messages, str(len(summaries)), *summaries, str(len(positions))]
        args += [str(p) for p in positions]
        args.append(str(len(tombstones)))
        for t in tombstones:
            args += [t.entry_id, erasure.tombstone_json(t)]
        args += [str(len(members) // 2), *members, str(sum(1 for raw in stored if raw is not None)), *replaced]
        nexts = self._next_replacing(keys, set(summaries), replaced) if replaced else []
        args += ["" if read_at is None else text(read_at), str(len(nexts) // 2), *nexts]
        with self._d.driver("prune"), script_errors():
            count = self._d.scripts.prune(
                keys=[
                    keys.msg,
                    keys.content,
                    keys.mut,
                    keys.rev,
                    keys.sum,
                    keys.active,
                    keys.seq,
                    keys.sumat,
                    keys.evat,
                    keys.state,
                    keys.evtr,
                ],
                args=args,
            )
        self._align_ttl(keys)
        return int(count)

    def _next_replacing(self, keys: ConversationKeys, pruned: set[str], replaced: list[str]) -> list[str]:
        """``(entry id, rb| value)`` of each entry the pruned summaries replaced, found among the others.

        Read when a summary goes (prune is not a hot path): the script sets them only if
        nothing was committed since, so a page of evictions keeps going through the index.
        """
        entries: set[str] = set()
        i = 0
        while i < len(replaced):  # (summary id, #replaces, replaces...) per summary
            n = int(replaced[i + 1])
            entries.update(replaced[i + 2 : i + 2 + n])
            i += 2 + n
        with self._d.driver("prune"):
            raws = cast(dict[bytes, bytes], self._d.client.hgetall(keys.sum))
        others = [SummaryEntry.model_validate_json(raw) for sid, raw in raws.items() if text(sid) not in pruned]
        found = eviction_index.replacing(s for s in others if entries.intersection(s.replaces))
        if found is None:
            return []  # a time a score cannot hold: the script marks the index incomplete
        return [part for rid in sorted(entries) for part in (rid, found.get(rid, ""))]

    def _align_ttl(self, keys: ConversationKeys) -> None:
        """With a ttl: a key an erase or prune created gets the conversation's expiry."""
        if self._d.ttl_ms:
            with self._d.driver("expire"):
                self._d.scripts.align_ttl(keys=list(keys.all))

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        out: list[Tombstone] = []
        for aid in self._d.agent_ids(session_id, agent_id):
            keys = self._d.conversation(session_id, aid)
            with self._d.driver("tombstones"):
                (mut,) = self._d.snapshot([keys.mut], ["h"])
            out += [
                erasure.tombstone_from(raw, session_id, aid)
                for field, raw in flat_hash(mut).items()
                if field.startswith("x|")
            ]
        return sorted(out, key=lambda t: t.erased_at)

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are (one script: each value only if unchanged since read)."""
        if not swaps:
            return 0
        keys = self._d.conversation(session_id, agent_id)
        order = list(keys.all)
        places: list[tuple[str, str, str]] = []  # key, h|l, field (list positions filled below)
        with self._d.driver("reseal"):
            wanted = any(s.where == "revision" for s in swaps)
            revisions = cast(list[bytes], self._d.client.lrange(keys.rev, 0, -1)) if wanted else []
            pipe = self._d.client.pipeline(transaction=False)
            for sw in swaps:
                if sw.where == "revision":
                    index = next((i for i, raw in enumerate(revisions) if sw.old.encode() in raw), -1)
                    places.append((keys.rev, "l", str(index)))
                    pipe.lindex(keys.rev, index)
                    continue
                key, field_name = {
                    "content": (keys.content, sw.ident),
                    "meta": (keys.msg, sw.ident),
                    "summary": (keys.sum, sw.ident),
                    "manager_state": (keys.state, "manager_state"),
                    "agent_state": (keys.state, "agent_state"),
                }[sw.where]
                places.append((key, "h", field_name))
                pipe.hget(key, field_name)
            current = pipe.execute()
        args: list[str] = []
        for sw, (key, kind, field_name), raw in zip(swaps, places, current, strict=True):
            if raw is None or field_name == "-1":
                continue
            old = text(raw)
            if sw.old not in old:
                continue
            args += [str(order.index(key) + 1), kind, field_name, old, old.replace(sw.old, sw.new)]
        if not args:
            return 0
        with self._d.driver("reseal"):
            return int(cast(int, self._d.scripts.reseal(keys=order, args=args)))

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """Say whether Redis's persistence files may still hold erased values (the keys never do).

        An append-only file keeps every write until it is rewritten, and an RDB snapshot
        taken before the erase keeps the old values until the next one replaces it; the
        store does not rewrite them itself (``BGREWRITEAOF`` / ``BGSAVE`` are the operator's).
        """
        with self._d.driver("persistence info"):
            info: dict[str, Any] = self._d.client.info("persistence")
        if self._d.cluster and info and all(isinstance(v, dict) for v in info.values()):
            nodes = list(info.values())  # one reply per node
        else:
            nodes = [info]
        notes = []
        if any(int(n.get("aof_enabled", 0)) for n in nodes):
            notes.append("the append-only file keeps the erased values until it is rewritten (BGREWRITEAOF)")
        if any(int(n.get("rdb_saves", 0)) or int(n.get("rdb_changes_since_last_save", 0)) < 0 for n in nodes):
            notes.append("an RDB snapshot taken before the erase keeps them until the next one replaces it (BGSAVE)")
        if not notes:
            return None
        return f"Redis at {self._d.url}: " + "; ".join(notes)
