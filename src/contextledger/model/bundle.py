"""Everything one conversation holds, as one record: what export, import and copy move.

:class:`ConversationRecords` is a plain record (it imports no store), so the stores
can write it and :mod:`contextledger.history.transfer` can read and move it without an import
cycle.
"""

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from contextledger.errors import InvalidMessage
from contextledger.model.messages import encode_blocks
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SummaryEntry,
    Tombstone,
)

__all__ = ["ConversationRecords", "check_records"]


class ConversationRecords(BaseModel):
    """Everything one conversation holds, as moved by export/import and copy.

    Attributes:
        state: The conversation state (its version is the one the target gets).
        messages: Every message entry, active and evicted, in seq order.
        summaries: Every summary, superseded ones included.
        reductions: Every reduction, in commit order.
        revisions: Every revision (the original contents).
        pins: Every pin event, in commit order.
        tombstones: What was erased or pruned.
    """

    # Built on first use (export, import, copy), not at import: a restore never needs it.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    state: ConversationState
    messages: tuple[HistoryEntry, ...] = ()
    summaries: tuple[SummaryEntry, ...] = ()
    reductions: tuple[Reduction, ...] = ()
    revisions: tuple[Revision, ...] = ()
    pins: tuple[PinEvent, ...] = ()
    tombstones: tuple[Tombstone, ...] = ()

    @property
    def session_id(self) -> str:
        """The session."""
        return self.state.session_id

    @property
    def agent_id(self) -> str:
        """The agent."""
        return self.state.agent_id

    def canonical(self) -> "ConversationRecords":
        """The same records in the one order every store reads them back in.

        Messages by seq; summaries, revisions and tombstones by time; reductions and pin
        events in commit order (by version, the store's order breaking ties; a changeset's pin
        events by their position).
        """
        return self.model_copy(
            update={
                "messages": tuple(sorted(self.messages, key=lambda m: (m.seq, m.message.message_id))),
                "summaries": tuple(sorted(self.summaries, key=lambda s: (s.created_at, s.seq, s.summary_id))),
                "reductions": tuple(sorted(self.reductions, key=lambda r: (r.version, r.created_at, r.reduction_id))),
                "revisions": tuple(sorted(self.revisions, key=lambda r: (r.created_at, r.message_id, r.number))),
                "pins": tuple(sorted(self.pins, key=lambda p: (p.version, p.at, p.position))),
                "tombstones": tuple(sorted(self.tombstones, key=lambda t: (t.erased_at, t.entry_id))),
            }
        )

    def check(self, *, strict_ids: bool = False) -> None:
        """Check that the records belong together and can be written (see :mod:`contextledger.history.consistency`).

        Args:
            strict_ids: Hold ids to the grammar of :mod:`contextledger.model.ids` (a file import).

        Raises:
            InvalidExport: A record breaks one of the ledger's invariants: it names another
                conversation, an id repeats or is not one, a seq repeats or is not below
                ``next_seq``, a reference names nothing, a count is negative... The error
                carries the record and the field at fault.
        """
        from contextledger.history.consistency import check_conversation

        check_conversation(self, strict_ids=strict_ids)


def check_records(records: ConversationRecords, *, strict_ids: bool = False) -> None:
    """Check ``records`` (see :meth:`ConversationRecords.check`) and that every JSON value can be stored.

    Stores call it before they write anything.

    Raises:
        InvalidExport: The records are inconsistent.
        InvalidMessage: A message, revision or state value cannot be stored as JSON (NaN, ...).
    """
    values: list[tuple[str, Any]] = [("manager state", records.state.manager_state)]
    values.append(("agent state", records.state.agent_state))
    values += [(f"message {h.message.message_id}", h.message.to_record()) for h in records.messages]
    values += [(f"revision of {r.message_id}", encode_blocks(r.original)) for r in records.revisions]
    for what, value in values:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(f"{what} cannot be stored as JSON: {exc}") from exc
    records.check(strict_ids=strict_ids)
