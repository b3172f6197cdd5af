"""The ledger schema as SQLAlchemy 2 typed declarative models.

The migrations in ``migrations/`` own the schema; these models describe the same
tables (a test checks that Alembic's autogenerate finds no difference on SQLite and
PostgreSQL). Tables carry a ``cl_`` prefix and constraints a naming convention so
the ledger can live in an application's own database beside its own tables.

Every id (message, summary, reduction) is unique within its conversation, exactly
like the memory store scopes them; rows reference their conversation by a surrogate
key so child rows stay narrow.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

from contextledger.stores.sql.read.decode import aware_utc

__all__ = [
    "CHANGESET_ID_LENGTH",
    "ID_LENGTH",
    "NAMING_CONVENTION",
    "PIN_SOURCE_LENGTH",
    "Base",
    "ChangesetRow",
    "ConversationRow",
    "EntryRow",
    "ExpiryRow",
    "LineageRow",
    "PinEventRow",
    "ReductionRow",
    "RevisionRow",
    "ScopeStateRow",
    "SessionRow",
    "SummaryRow",
    "SummarySourceRow",
    "TombstoneRow",
    "UTCDateTime",
]

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Deterministic constraint names, so migrations can name what they alter or drop."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every engine.

    PostgreSQL stores ``timestamptz``; SQLite has no time zone, so values are stored as
    naive UTC (which also keeps its text comparison correct) and read back as aware UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC; naive values are taken to be UTC already."""
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime (as the SQLite reader does: :func:`.read.decode.aware_utc`)."""
        return None if value is None else aware_utc(value)


def _json() -> TypeEngine[Any]:
    # Plain JSON on PostgreSQL too, not JSONB: message content and host state must come
    # back exactly as written, and JSONB rejects "\u0000" and reorders keys.
    return JSON(none_as_null=True)


def _id_list() -> TypeEngine[Any]:
    # Lists of ids the library generates: JSONB on PostgreSQL so they can be queried.
    return JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


_PK = BigInteger().with_variant(Integer(), "sqlite")
"""A 64-bit surrogate key; SQLite only auto-increments an ``INTEGER PRIMARY KEY``."""
ID_LENGTH = 255
"""Longest id (session, agent, message, summary, reduction) the schema stores."""
_ID = String(ID_LENGTH)
CHANGESET_ID_LENGTH = 64
"""Longest changeset id (clients generate them; the default is a 32-character hex uuid)."""
PIN_SOURCE_LENGTH = 32
"""Longest pin source name (``api``, ``model``, ``host``...)."""
_STATUS_CHECK = "status IN ('active', 'evicted')"


class Base(DeclarativeBase):
    """Declarative base of the ledger tables (its own metadata, never an app's)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime()}  # noqa: RUF012 - SQLAlchemy reads a class attribute


class SessionRow(Base):
    """A session: the root every row of it cascades from on delete, and the app and user it belongs to."""

    __tablename__ = "cl_sessions"
    __table_args__ = (Index("ix_cl_sessions_app_user_id", "app", "user_id"),)

    session_id: Mapped[str] = mapped_column(_ID, primary_key=True)
    created_at: Mapped[datetime]
    # Apps and users (0005): set by the commit that creates the session; NULL when not named.
    app: Mapped[str | None] = mapped_column(_ID)
    user_id: Mapped[str | None] = mapped_column(_ID)


class ScopeStateRow(Base):
    """One key of the state of an app (``user_id`` empty) or of one user of it.

    A row per key, so concurrent writers of different keys never contend on one row and
    a merge is one upsert per key. User ids are never empty (the ledger refuses them), so
    the empty ``user_id`` names the app's own state.
    """

    __tablename__ = "cl_scope_state"

    app: Mapped[str] = mapped_column(_ID, primary_key=True)
    user_id: Mapped[str] = mapped_column(_ID, primary_key=True)
    key: Mapped[str] = mapped_column(_ID, primary_key=True)
    value: Mapped[Any] = mapped_column(_json(), nullable=True)  # a JSON null is stored as SQL NULL
    updated_at: Mapped[datetime]


class ConversationRow(Base):
    """Per (session_id, agent_id) state; ``version`` guards every changeset."""

    __tablename__ = "cl_conversations"
    __table_args__ = (UniqueConstraint("session_id", "agent_id"),)

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    session_id: Mapped[str] = mapped_column(_ID, ForeignKey("cl_sessions.session_id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(_ID)
    version: Mapped[int] = mapped_column(BigInteger)
    model_call_count: Mapped[int] = mapped_column(BigInteger)
    next_seq: Mapped[int] = mapped_column(BigInteger)
    manager_state: Mapped[dict[str, Any] | None] = mapped_column(_json())
    agent_state: Mapped[dict[str, Any] | None] = mapped_column(_json())
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class EntryRow(Base):
    """One message entry of the ledger, active or evicted; never deleted by a reduction.

    The ``(conversation_id, status, seq)`` index lets a restore read exactly the active
    rows in order, however long the evicted history grows.
    """

    __tablename__ = "cl_entries"
    __table_args__ = (
        UniqueConstraint("conversation_id", "message_id"),
        Index("ix_cl_entries_conversation_id_status_seq", "conversation_id", "status", "seq"),
        CheckConstraint(_STATUS_CHECK, name="status"),
    )

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(BigInteger)
    message_id: Mapped[str] = mapped_column(_ID)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[list[dict[str, Any]]] = mapped_column(_json())
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", _json())
    pinned: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(8))
    # The reduction id, not a foreign key: it is written in the same transaction as the
    # reduction row, and a key here would make every reduction delete scan this table.
    evicted_by: Mapped[str | None] = mapped_column(_ID)
    tokens: Mapped[int] = mapped_column(Integer)
    revision_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]
    # Time travel (0003): the first model call that could see the entry, and the version
    # of the commit that appended it; 0 for rows written before.
    from_call: Mapped[int] = mapped_column(BigInteger, server_default="0")
    version: Mapped[int] = mapped_column(BigInteger, server_default="0")


class RevisionRow(Base):
    """The content a message had before a revision rewrote it."""

    __tablename__ = "cl_revisions"
    __table_args__ = (
        UniqueConstraint("conversation_id", "message_id", "number"),
        ForeignKeyConstraint(
            ["conversation_id", "message_id"],
            ["cl_entries.conversation_id", "cl_entries.message_id"],
            ondelete="CASCADE",
        ),
    )

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK)
    message_id: Mapped[str] = mapped_column(_ID)
    number: Mapped[int] = mapped_column(Integer)
    original: Mapped[list[dict[str, Any]]] = mapped_column(_json())
    reason: Mapped[str] = mapped_column(_ID)
    reduction_id: Mapped[str | None] = mapped_column(_ID)
    created_at: Mapped[datetime]


class ReductionRow(Base):
    """One reduction: trigger, strategy, counts before and after, what it removed."""

    __tablename__ = "cl_reductions"
    __table_args__ = (
        UniqueConstraint("conversation_id", "reduction_id"),
        Index("ix_cl_reductions_conversation_id_created_at", "conversation_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    reduction_id: Mapped[str] = mapped_column(_ID)
    trigger: Mapped[str] = mapped_column(String(32))
    strategy: Mapped[str] = mapped_column(_ID)
    created_at: Mapped[datetime]
    messages_before: Mapped[int] = mapped_column(Integer)
    messages_after: Mapped[int] = mapped_column(Integer)
    tokens_before: Mapped[int] = mapped_column(BigInteger)
    tokens_after: Mapped[int] = mapped_column(BigInteger)
    evicted: Mapped[list[str]] = mapped_column(_id_list())
    revised: Mapped[list[str]] = mapped_column(_id_list())
    summary_id: Mapped[str | None] = mapped_column(_ID)
    model_call_count: Mapped[int] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[str | None] = mapped_column(Text)
    restored: Mapped[list[str] | None] = mapped_column(_id_list())
    from_call: Mapped[int] = mapped_column(BigInteger, server_default="0")
    version: Mapped[int] = mapped_column(BigInteger, server_default="0")


class SummaryRow(Base):
    """A summary entry: first-class, never overwritten, shown in place of what it replaced."""

    __tablename__ = "cl_summaries"
    __table_args__ = (
        UniqueConstraint("conversation_id", "summary_id"),
        Index("ix_cl_summaries_conversation_id_status_seq", "conversation_id", "status", "seq"),
        CheckConstraint(_STATUS_CHECK, name="status"),
    )

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    summary_id: Mapped[str] = mapped_column(_ID)
    seq: Mapped[int] = mapped_column(BigInteger)
    content: Mapped[str] = mapped_column(Text)
    summarizer: Mapped[str] = mapped_column(_ID)
    reduction_id: Mapped[str] = mapped_column(_ID)
    supersedes: Mapped[str | None] = mapped_column(_ID)
    superseded_by: Mapped[str | None] = mapped_column(_ID)
    status: Mapped[str] = mapped_column(String(8))
    evicted_by: Mapped[str | None] = mapped_column(_ID)
    tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]


class SummarySourceRow(Base):
    """One entry a summary replaced, in order: the association of summaries to entries.

    A table rather than a JSON list so "which summary replaced this entry" is one
    indexed join in the eviction query on every engine. The replaced entry is a message
    or an earlier summary (two tables), hence an id and a kind instead of a foreign key.
    """

    __tablename__ = "cl_summary_sources"
    __table_args__ = (
        Index("ix_cl_summary_sources_conversation_id_entry_id", "conversation_id", "entry_id"),
        CheckConstraint("kind IN ('message', 'summary')", name="kind"),
    )

    summary_row_id: Mapped[int] = mapped_column(
        _PK, ForeignKey("cl_summaries.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    entry_id: Mapped[str] = mapped_column(_ID)
    kind: Mapped[str] = mapped_column(String(8))


class ChangesetRow(Base):
    """The commit log: which changeset produced which version of a conversation.

    Written in the same transaction (or statement) as the changeset itself, so reading it
    back tells whether a commit whose reply was lost applied (exactly once). Keyed by
    version: the read-back looks up ``expected_version + 1``.
    """

    __tablename__ = "cl_changesets"
    # On SQLite the rows live in the primary key's b-tree (migration 0008): a commit
    # writes one page of the log instead of a rowid table's page and its key's index page.
    __table_args__ = ({"sqlite_with_rowid": False},)

    conversation_id: Mapped[int] = mapped_column(
        _PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    changeset_id: Mapped[str] = mapped_column(String(CHANGESET_ID_LENGTH))
    created_at: Mapped[datetime]


class PinEventRow(Base):
    """One pin or unpin: which entry, who asked, when, in which changeset."""

    __tablename__ = "cl_pin_events"
    __table_args__ = (
        Index(
            "ix_cl_pin_events_conversation_id_created_at_version_position",
            "conversation_id",
            "created_at",
            "version",
            "position",
        ),
    )

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    entry_id: Mapped[str] = mapped_column(_ID)
    pinned: Mapped[bool] = mapped_column(Boolean)
    source: Mapped[str] = mapped_column(String(PIN_SOURCE_LENGTH))
    changeset_id: Mapped[str] = mapped_column(String(CHANGESET_ID_LENGTH))
    created_at: Mapped[datetime]
    from_call: Mapped[int] = mapped_column(BigInteger, server_default="0")
    version: Mapped[int] = mapped_column(BigInteger, server_default="0")
    position: Mapped[int] = mapped_column(Integer, server_default="0")


class TombstoneRow(Base):
    """What is left of an erased or pruned entry: which, when, why, and the summaries redacted."""

    __tablename__ = "cl_tombstones"
    __table_args__ = (Index("ix_cl_tombstones_conversation_id_entry_id", "conversation_id", "entry_id"),)

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    entry_id: Mapped[str] = mapped_column(_ID)
    reason: Mapped[str] = mapped_column(Text)
    summaries: Mapped[list[str] | None] = mapped_column(_id_list())
    created_at: Mapped[datetime]


class LineageRow(Base):
    """A fork (of a fork...) or a copy taken from a conversation, kept under that ancestor.

    It goes with its ancestor (``ON DELETE CASCADE``); the descendant is named by its ids,
    not a foreign key: it may be in another ledger (``ledger``), not created yet (the row
    is written before the fork's commit), or gone.
    """

    __tablename__ = "cl_lineage"
    __table_args__ = (Index("ix_cl_lineage_conversation_id", "conversation_id"),)

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(_PK, ForeignKey("cl_conversations.id", ondelete="CASCADE"))
    child_session_id: Mapped[str] = mapped_column(_ID)
    child_agent_id: Mapped[str] = mapped_column(_ID)
    kind: Mapped[str] = mapped_column(String(16))
    ledger: Mapped[str] = mapped_column(Text)
    """The masked URL of the ledger holding a copy; empty for this ledger."""
    depth: Mapped[int] = mapped_column(BigInteger)
    at_call: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    version: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime]


class ExpiryRow(Base):
    """What is left of a conversation that expired: which, when, why, its last write (no foreign key: it is gone)."""

    __tablename__ = "cl_expiries"
    __table_args__ = (Index("ix_cl_expiries_session_id_agent_id", "session_id", "agent_id"),)

    id: Mapped[int] = mapped_column(_PK, primary_key=True)
    session_id: Mapped[str] = mapped_column(_ID)
    agent_id: Mapped[str] = mapped_column(_ID)
    reason: Mapped[str] = mapped_column(Text)
    expired_at: Mapped[datetime]
    last_write: Mapped[datetime]
