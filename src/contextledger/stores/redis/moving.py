"""The Redis store's lineage and transfer: links kept under an ancestor, whole conversations imported.

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData` (the scripts and record formats are in
:mod:`~contextledger.stores.redis.lineage` and :mod:`~contextledger.stores.redis.transfer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from contextledger.model.bundle import ConversationRecords, check_records
from contextledger.model.records import LineageLink
from contextledger.stores.redis import lineage, transfer
from contextledger.stores.redis.codec import flat_hash
from contextledger.stores.redis.data import RedisData, script_errors
from contextledger.stores.redis.keys import SessionKeys

__all__ = ["RedisMoving"]


class RedisMoving:
    """The TRANSFER and LINEAGE parts of the store contract."""

    def __init__(self, data: RedisData) -> None:
        """Work on ``data``."""
        self._d = data

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records with one script; ``False`` (nothing written) if it exists.

        With a ``ttl`` the keys get it as a commit would give them.
        """
        check_records(records)
        args = transfer.import_args(records, self._d.ttl_ms)
        keys = self._d.conversation(records.session_id, records.agent_id)
        index = SessionKeys.of(self._d.key_prefix, records.session_id)
        with self._d.driver("import"), script_errors():
            if not self._d.cluster:
                written = self._d.scripts.import_(keys=[*keys.all, index.sessions, index.agents], args=args)
            else:
                pipe = self._d.client.pipeline(transaction=False)
                pipe.sadd(index.agents, records.agent_id)
                pipe.sadd(SessionKeys.slots(self._d.key_prefix), keys.slot)
                pipe.execute()
                slot_index = SessionKeys.slot_index(self._d.key_prefix, keys.slot)
                written = self._d.scripts.import_(keys=[*keys.all, slot_index], args=args)
                if self._d.ttl_ms:
                    pipe = self._d.client.pipeline(transaction=False)
                    pipe.pexpire(index.agents, self._d.ttl_ms)
                    pipe.pexpire(SessionKeys.slots(self._d.key_prefix), self._d.ttl_ms)
                    pipe.execute()
        return bool(int(cast(int, written)))

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its ancestor conversation while it exists (one script per ancestor)."""
        by_ancestor: dict[tuple[str, str], list[str]] = {}
        for link in links:
            by_ancestor.setdefault((link.session_id, link.agent_id), []).extend(
                [lineage.link_field(link), lineage.link_json(link)]
            )
        added = 0
        for (session_id, agent_id), args in by_ancestor.items():
            keys = self._d.conversation(session_id, agent_id)
            with self._d.driver("add lineage"):
                added += int(cast(int, self._d.scripts.link(keys=[keys.state, keys.mut], args=args)))
        return added

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links kept under the session's conversations (or one agent's), oldest first."""
        out: list[LineageLink] = []
        for aid in self._d.agent_ids(session_id, agent_id):
            keys = self._d.conversation(session_id, aid)
            with self._d.driver("lineage"):
                (mut,) = self._d.snapshot([keys.mut], ["h"])
            out += [
                lineage.link_from(raw, session_id, aid)
                for field, raw in flat_hash(mut).items()
                if field.startswith("l|")
            ]
        return sorted(out, key=lambda link: (link.created_at, link.depth, link.key))
