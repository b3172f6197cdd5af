"""Writing one conversation's complete records (import, copy) inside the caller's transaction.

Every row is written as the records give it -- ids, timestamps, version, time-travel
stamps, statuses, summary chains -- with one executemany ``INSERT`` per table (one per
summary for its sources, which need the summary's key). The caller's transaction makes
it one atomic commit; a conversation that exists is left untouched.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from contextledger.errors import ConcurrencyConflict
from contextledger.model.bundle import ConversationRecords
from contextledger.stores.sql.fields import ENTRIES, PIN_EVENTS, REDUCTIONS, REVISIONS, SUMMARIES, TOMBSTONES
from contextledger.stores.sql.models import (
    ConversationRow,
    EntryRow,
    PinEventRow,
    ReductionRow,
    RevisionRow,
    SessionRow,
    SummaryRow,
    TombstoneRow,
)
from contextledger.stores.sql.write.apply import insert_summary_sources

__all__ = ["import_conversation"]


def _table(model: type[Any]) -> Table:
    table: Table = model.__table__
    return table


def import_conversation(conn: Connection, records: ConversationRecords) -> bool:
    """Insert every row of ``records``; ``False`` (nothing written) when the conversation exists.

    Raises:
        ConcurrencyConflict: Another writer created the conversation meanwhile.
    """
    state = records.state
    found = conn.execute(
        select(ConversationRow.id).where(
            ConversationRow.session_id == state.session_id, ConversationRow.agent_id == state.agent_id
        )
    ).first()
    if found is not None:
        return False
    upsert = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(SessionRow)
    conn.execute(
        upsert.values(session_id=state.session_id, created_at=state.created_at).on_conflict_do_nothing(
            index_elements=["session_id"]
        )
    )
    try:
        result = conn.execute(
            insert(ConversationRow).values(
                session_id=state.session_id,
                agent_id=state.agent_id,
                version=state.version,
                model_call_count=state.model_call_count,
                next_seq=state.next_seq,
                manager_state=state.manager_state,
                agent_state=state.agent_state,
                created_at=state.created_at,
                updated_at=state.updated_at,
            )
        )
    except IntegrityError as exc:
        raise ConcurrencyConflict(
            f"session_id={state.session_id} agent_id={state.agent_id}: created concurrently during the import"
        ) from exc
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    conversation = int(key[0])
    if records.messages:
        rows = []
        for h in records.messages:
            record = h.message.to_record()
            rows.append(
                {
                    "conversation_id": conversation,
                    "message_id": h.message.message_id,
                    "role": record["role"],
                    "content": record["content"],
                    "metadata": record["metadata"],
                    **ENTRIES.values(h),
                }
            )
        conn.execute(insert(_table(EntryRow)), rows)
    if records.revisions:
        conn.execute(
            insert(_table(RevisionRow)),
            [{"conversation_id": conversation, **REVISIONS.values(r)} for r in records.revisions],
        )
    if records.reductions:
        conn.execute(
            insert(_table(ReductionRow)),
            [{"conversation_id": conversation, **REDUCTIONS.values(red)} for red in records.reductions],
        )
    summary_ids = {s.summary_id for s in records.summaries}
    for s in records.summaries:
        inserted = conn.execute(
            insert(SummaryRow).values(conversation_id=conversation, **SUMMARIES.values(s))
        ).inserted_primary_key
        assert inserted is not None
        insert_summary_sources(conn, conversation, inserted[0], s, summary_ids)
    if records.pins:
        conn.execute(
            insert(_table(PinEventRow)),
            [{"conversation_id": conversation, **PIN_EVENTS.values(p)} for p in records.pins],
        )
    if records.tombstones:
        conn.execute(
            insert(_table(TombstoneRow)),
            [{"conversation_id": conversation, **TOMBSTONES.values(t)} for t in records.tombstones],
        )
    return True
