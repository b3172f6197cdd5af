"""Undo on SQL: evicted entries made active again, in the changeset's transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, update

from contextledger.core.changeset import Changeset
from contextledger.errors import EntryNotFound
from contextledger.stores.sql.models import EntryRow, SummaryRow

__all__ = ["restore_entries"]

_BATCH = 500  # ids per IN (...) list, well under every engine's bound-parameter limit


def chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    """``ids`` in batches (kept here: importing the changes module would make an import cycle)."""
    for start in range(0, len(ids), _BATCH):
        yield ids[start : start + _BATCH]


def restore_entries(conn: Connection, conversation_id: int, cs: Changeset) -> None:
    """Make the entries ``cs.restore`` names active again (messages and summaries).

    Runs inside the caller's transaction, before revisions are applied (a restored
    message may be revised by the same changeset).

    Raises:
        EntryNotFound: An id is not an evicted entry of the conversation (the caller's
            transaction is then rolled back: nothing is written).
    """
    if not cs.restore:
        return
    messages = sorted(e.entry_id for e in cs.restore if e.kind == "message")
    summaries = sorted(e.entry_id for e in cs.restore if e.kind == "summary")
    changed = 0
    for batch in chunks(messages):
        changed += conn.execute(
            update(EntryRow)
            .where(
                EntryRow.conversation_id == conversation_id,
                EntryRow.status == "evicted",
                EntryRow.message_id.in_(batch),
            )
            .values(status="active", evicted_by=None)
        ).rowcount
    for batch in chunks(summaries):
        changed += conn.execute(
            update(SummaryRow)
            .where(
                SummaryRow.conversation_id == conversation_id,
                SummaryRow.status == "evicted",
                SummaryRow.summary_id.in_(batch),
            )
            .values(status="active", evicted_by=None, superseded_by=None)
        ).rowcount
    if changed != len(cs.restore):
        raise EntryNotFound(f"cannot restore {len(cs.restore) - changed} of {len(cs.restore)} entries: not evicted")
