"""Erase and prune on SQL: one transaction each; the SQLite bytes leave the file.

SQLite keeps the content of a deleted or overwritten cell in free pages until they are
reused; with ``PRAGMA secure_delete`` it zeroes them, and a WAL checkpoint
(``TRUNCATE``) moves the new pages into the database file and empties the WAL, so the
erased text is in neither file afterwards. PostgreSQL keeps dead row versions until
``VACUUM`` reclaims them; :func:`vacuum` runs it on the ledger's tables (``full=True``
rewrites them, so the old bytes leave the data files).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from sqlalchemy import Connection, delete, insert, select, text, update

from contextledger.errors import EntryNotFound
from contextledger.model.messages import Message
from contextledger.model.records import Tombstone
from contextledger.stores.sql.fields import TOMBSTONES
from contextledger.stores.sql.models import ConversationRow, EntryRow, RevisionRow, SummaryRow, TombstoneRow
from contextledger.stores.sql.window import record
from contextledger.stores.sql.write.apply import chunks

__all__ = ["LEDGER_TABLES", "POSTGRES_PENDING", "erase", "prune", "settle_sqlite", "tombstones"]

POSTGRES_PENDING = (
    "PostgreSQL keeps erased row versions in the table files until VACUUM reuses their space: run "
    "ledger.settle_erasure(vacuum=True) (VACUUM FULL of the ledger's tables, which locks them while it runs); "
    "its WAL, archives, replicas and backups keep them until those are recycled"
)
"""What a PostgreSQL erasure leaves until ``VACUUM`` (see ``docs/operations/erasure.md``)."""

logger = logging.getLogger("contextledger.stores.sql.store")

_ATTEMPT_MS = 100

LEDGER_TABLES = ("cl_entries", "cl_revisions", "cl_summaries", "cl_summary_sources", "cl_tombstones")
"""The tables an erase or a prune rewrites (what :func:`vacuum` cleans)."""


def _conversation(conn: Connection, session_id: str, agent_id: str) -> int | None:
    found: int | None = conn.execute(
        select(ConversationRow.id).where(ConversationRow.session_id == session_id, ConversationRow.agent_id == agent_id)
    ).scalar()
    return found


def secure(conn: Connection) -> None:
    """On SQLite, zero deleted content (``secure_delete``) for this connection."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete = ON")


def erase(conn: Connection, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
    """Overwrite the entry, delete its revisions, rewrite ``summaries``, insert the tombstone.

    Raises:
        EntryNotFound: The entry or a summary is not in the conversation (the caller's
            transaction is rolled back).
    """
    conversation = _conversation(conn, tombstone.session_id, tombstone.agent_id)
    if conversation is None:
        raise EntryNotFound(f"no conversation {tombstone.session_id}/{tombstone.agent_id}")
    record = erased.to_record()
    changed = conn.execute(
        update(EntryRow)
        .where(EntryRow.conversation_id == conversation, EntryRow.message_id == tombstone.entry_id)
        .values(content=record["content"], metadata_=record["metadata"], revision_count=0)
    ).rowcount
    if changed != 1:
        raise EntryNotFound(f"no message {tombstone.entry_id} in this conversation")
    conn.execute(
        delete(RevisionRow).where(
            RevisionRow.conversation_id == conversation, RevisionRow.message_id == tombstone.entry_id
        )
    )
    for summary_id, content in summaries.items():
        done = conn.execute(
            update(SummaryRow)
            .where(SummaryRow.conversation_id == conversation, SummaryRow.summary_id == summary_id)
            .values(content=content)
        ).rowcount
        if done != 1:
            raise EntryNotFound(f"no summary {summary_id} in this conversation")
    _insert(conn, conversation, [tombstone])
    # A new version: a conversation opened before the erase conflicts at its next commit
    # and re-reads, instead of planning (summarizing) the erased text it holds.
    conn.execute(
        update(ConversationRow).where(ConversationRow.id == conversation).values(version=ConversationRow.version + 1)
    )


def prune(
    conn: Connection, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]
) -> int:
    """Delete the evicted entries among ``entry_ids`` (never an active one); keep their tombstones."""
    conversation = _conversation(conn, session_id, agent_id)
    if conversation is None:
        return 0
    gone: set[str] = set()
    for batch in chunks(sorted(set(entry_ids))):
        messages = set(
            conn.execute(
                select(EntryRow.message_id).where(
                    EntryRow.conversation_id == conversation,
                    EntryRow.status == "evicted",
                    EntryRow.message_id.in_(batch),
                )
            ).scalars()
        )
        summaries = set(
            conn.execute(
                select(SummaryRow.summary_id).where(
                    SummaryRow.conversation_id == conversation,
                    SummaryRow.status == "evicted",
                    SummaryRow.summary_id.in_(batch),
                )
            ).scalars()
        )
        if messages:
            # Revisions go with their entry (ON DELETE CASCADE), deleted first for engines
            # that do not enforce foreign keys.
            conn.execute(
                delete(RevisionRow).where(
                    RevisionRow.conversation_id == conversation, RevisionRow.message_id.in_(messages)
                )
            )
            conn.execute(
                delete(EntryRow).where(EntryRow.conversation_id == conversation, EntryRow.message_id.in_(messages))
            )
        if summaries:
            conn.execute(
                delete(SummaryRow).where(
                    SummaryRow.conversation_id == conversation, SummaryRow.summary_id.in_(summaries)
                )
            )
        gone |= messages | summaries
    _insert(conn, conversation, [t for t in tombstones if t.entry_id in gone])
    return len(gone)


def _insert(conn: Connection, conversation: int, rows: Sequence[Tombstone]) -> None:
    if not rows:
        return
    conn.execute(
        insert(TombstoneRow),
        [{"conversation_id": conversation, **TOMBSTONES.values(t)} for t in rows],
    )


def tombstones(conn: Connection, session_id: str, agent_id: str | None) -> list[Tombstone]:
    """The tombstones of the session (or one agent), oldest first."""
    stmt = (
        select(ConversationRow.agent_id, *TOMBSTONES.columns())
        .join(ConversationRow, ConversationRow.id == TombstoneRow.conversation_id)
        .where(ConversationRow.session_id == session_id)
        .order_by(TombstoneRow.created_at, TombstoneRow.id)
    )
    if agent_id is not None:
        stmt = stmt.where(ConversationRow.agent_id == agent_id)
    return [
        record(Tombstone, row, session_id=session_id, summaries=tuple(row["summaries"] or ()))
        for row in conn.execute(stmt).mappings()
    ]


def checkpoint(conn: Connection) -> bool:
    """On SQLite, move the WAL into the database file and empty it (outside a transaction); whether it could.

    ``False`` when another connection's read transaction still needs frames of the WAL
    (they hold the page images written before an erase), so it could not be emptied.
    """
    if conn.dialect.name != "sqlite":
        return True
    row = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").first()
    return row is None or int(row[0]) == 0


def settle_sqlite(conn: Connection, *, timeout: float, what: str) -> str | None:
    """Checkpoint the WAL (``TRUNCATE``), trying again for at most ``timeout`` seconds; ``None`` once done.

    Each attempt waits a short while (its own busy timeout) so that a reader that ends
    soon lets it through, and the connection's own busy timeout is restored afterwards.
    """
    deadline = time.monotonic() + max(timeout, 0.0)
    previous = conn.exec_driver_sql("PRAGMA busy_timeout").scalar()
    conn.exec_driver_sql(f"PRAGMA busy_timeout = {_ATTEMPT_MS}")
    try:
        while True:
            if checkpoint(conn):
                return None
            if time.monotonic() >= deadline:
                break
            time.sleep(_ATTEMPT_MS / 1000)
    finally:
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(previous or 0)}")
    logger.warning("url=<%s>, waited=<%s> | the WAL still holds erased bytes: a reader holds it", what, timeout)
    return (
        f"the SQLite WAL of {what} still holds erased bytes: another connection kept a read transaction open "
        f"for the {timeout:g}s waited; once it ends, run ledger.settle_erasure() to checkpoint and empty the WAL"
    )


def vacuum(conn: Connection, *, full: bool = False) -> None:
    """Reclaim dead row versions of the ledger's tables (autocommit connection).

    On PostgreSQL ``VACUUM`` (``full``: ``VACUUM FULL``, which rewrites the tables so the
    old bytes leave the data files); on SQLite ``VACUUM`` rebuilds the file.
    """
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("VACUUM")
        return
    verb = "VACUUM FULL" if full else "VACUUM"
    conn.execute(text(f"{verb} {', '.join(LEDGER_TABLES)}"))
