"""Opt-in hash partitioning of the entries table on PostgreSQL (``contextledger db partition``).

``cl_entries`` is the one table that grows with the whole history (every message ever
appended, evicted or not). :func:`partition_entries` rebuilds it, in one transaction,
as a declaratively partitioned table ``PARTITION BY HASH (conversation_id)`` with
``partitions`` partitions (``cl_entries_p0`` ...), moves the rows across and drops the old
table. Every statement of the ledger names the conversation it reads or writes, so
PostgreSQL prunes to the one partition that holds it: a restore, an append, a listing,
a reduction or an erasure touches one partition's indexes, whatever the others hold.

Why the conversation and not the session: a conversation is one session's one agent
(``cl_conversations`` maps ``(session_id, agent_id)`` to its id), it is the key every
query already filters on, and it keeps each conversation's entries together -- so the
partitioning is by the session in every sense a query sees, without a column that
would have to be written on every append.

What changes in the table, and why: the primary key becomes ``(id, conversation_id)`` (a
partitioned table's unique keys must include the partition key; ``id`` stays unique, drawn
from the same sequence); the unique ``(conversation_id, message_id)`` key, the
``(conversation_id, status, seq)`` index, the status check and the foreign keys (to the
conversation, and from ``cl_revisions``) keep their names and meaning. The Alembic
revision does not change: later migrations apply to the partitioned table alike.

The schema stays that of this library's head; a database is partitioned once
(:func:`is_partitioned`). Nothing here runs on SQLite.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from contextledger.errors import ConfigurationError, StoreError
from contextledger.stores.sql.engine import mask, translate

__all__ = ["DEFAULT_PARTITIONS", "is_partitioned", "partition_entries", "partitions_of"]

logger = logging.getLogger(__name__)

DEFAULT_PARTITIONS = 16
"""Partitions made by default: enough to keep each one's indexes small up to about a billion entries."""

_FK_REVISIONS = "fk_cl_revisions_conversation_id_message_id_cl_entries"
_FK_CONVERSATION = "fk_cl_entries_conversation_id_cl_conversations"
_UNIQUE = "uq_cl_entries_conversation_id_message_id"
_INDEX = "ix_cl_entries_conversation_id_status_seq"


def is_partitioned(conn: Connection) -> bool:
    """Whether ``cl_entries`` is a partitioned table on this PostgreSQL database."""
    found = conn.execute(text("SELECT relkind FROM pg_class WHERE oid = to_regclass('cl_entries')")).scalar()
    return found == "p"


def partitions_of(conn: Connection) -> list[str]:
    """The partitions of ``cl_entries``, by name (empty when it is not partitioned)."""
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass('cl_entries') ORDER BY c.relname"
        )
    )
    return [str(name) for (name,) in rows]


def _statements(partitions: int, sequence: str) -> list[str]:
    """The DDL that turns ``cl_entries`` into a hash-partitioned table, in order (``sequence``: its id's)."""
    out = [
        # Nothing may write the table while it is rebuilt (the lock is held until commit).
        "LOCK TABLE cl_entries IN ACCESS EXCLUSIVE MODE",
        f"ALTER TABLE cl_revisions DROP CONSTRAINT {_FK_REVISIONS}",
        "ALTER TABLE cl_entries RENAME TO cl_entries_unpartitioned",
    ]
    # the old table's constraint and index names are the new table's: move them aside
    for name in ("pk_cl_entries", _UNIQUE, _FK_CONVERSATION, "ck_cl_entries_status"):
        out.append(f"ALTER TABLE cl_entries_unpartitioned RENAME CONSTRAINT {name} TO {name}_old")
    out.append(f"ALTER INDEX {_INDEX} RENAME TO {_INDEX}_old")
    out += [
        "CREATE TABLE cl_entries (LIKE cl_entries_unpartitioned INCLUDING DEFAULTS INCLUDING STORAGE) "
        "PARTITION BY HASH (conversation_id)",
        "ALTER TABLE cl_entries ADD CONSTRAINT pk_cl_entries PRIMARY KEY (id, conversation_id)",
        f"ALTER TABLE cl_entries ADD CONSTRAINT {_UNIQUE} UNIQUE (conversation_id, message_id)",
        "ALTER TABLE cl_entries ADD CONSTRAINT ck_cl_entries_status CHECK (status IN ('active', 'evicted'))",
        f"ALTER TABLE cl_entries ADD CONSTRAINT {_FK_CONVERSATION} FOREIGN KEY (conversation_id) "
        "REFERENCES cl_conversations (id) ON DELETE CASCADE",
        f"CREATE INDEX {_INDEX} ON cl_entries (conversation_id, status, seq)",
    ]
    out += [
        f"CREATE TABLE cl_entries_p{i} PARTITION OF cl_entries FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
        for i in range(partitions)
    ]
    out += [
        "INSERT INTO cl_entries SELECT * FROM cl_entries_unpartitioned",
        # the id sequence now belongs to the new table (dropping the old one would drop it)
        f"ALTER SEQUENCE {sequence} OWNED BY cl_entries.id",
        "DROP TABLE cl_entries_unpartitioned",
        f"ALTER TABLE cl_revisions ADD CONSTRAINT {_FK_REVISIONS} FOREIGN KEY (conversation_id, message_id) "
        "REFERENCES cl_entries (conversation_id, message_id) ON DELETE CASCADE",
        "ANALYZE cl_entries",
    ]
    return out


def partition_entries(engine: Engine, partitions: int = DEFAULT_PARTITIONS) -> bool:
    """Rebuild ``cl_entries`` as ``partitions`` hash partitions of the conversation, in one transaction.

    Writers of the table wait for it (an exclusive lock); readers of other tables do not.
    Idempotent: a database already partitioned is left as it is.

    Args:
        engine: A PostgreSQL engine on a ledger at this library's head.
        partitions: How many partitions (2 to 1024).

    Returns:
        ``True`` when the table was partitioned now, ``False`` when it already was.

    Raises:
        ConfigurationError: Not PostgreSQL, or ``partitions`` out of range.
        StoreUnavailable: The server could not be reached (nothing changed).
        StoreError: The rebuild failed (it was rolled back: nothing changed).
    """
    if engine.dialect.name != "postgresql":
        raise ConfigurationError("only a PostgreSQL ledger can be partitioned")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 2 <= partitions <= 1024:
        raise ConfigurationError(f"partitions must be an integer from 2 to 1024, got {partitions!r}")
    started = time.perf_counter()
    try:
        with engine.begin() as conn:
            if is_partitioned(conn):
                logger.info("url=<%s> | cl_entries is already partitioned", mask(engine.url))
                return False
            if conn.execute(text("SELECT to_regclass('cl_entries')")).scalar() is None:
                raise StoreError(f"{mask(engine.url)} has no ledger schema: run `contextledger db upgrade` first")
            sequence = conn.execute(text("SELECT pg_get_serial_sequence('cl_entries', 'id')")).scalar()
            if sequence is None:
                raise StoreError(f"{mask(engine.url)}: cl_entries.id draws from no sequence; not a ledger schema")
            for statement in _statements(partitions, str(sequence)):
                conn.execute(text(statement))
    except SQLAlchemyError as exc:
        raise translate(exc, engine.url) from exc
    logger.info(
        "url=<%s>, partitions=<%d>, seconds=<%.1f> | partitioned cl_entries by conversation",
        mask(engine.url),
        partitions,
        time.perf_counter() - started,
    )
    return True
