"""Initial ledger schema: sessions, conversations, entries, revisions, reductions, summaries.

Revision ID: 0001
Revises:
Create Date: 2026-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ID = sa.String(length=255)
TS = sa.DateTime(timezone=True)
PAYLOAD = sa.JSON(none_as_null=True)
ID_LIST = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
STATUS_CHECK = "status IN ('active', 'evicted')"


def upgrade() -> None:
    op.create_table(
        "cl_sessions",
        sa.Column("session_id", ID, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_cl_sessions")),
    )
    op.create_table(
        "cl_conversations",
        sa.Column("id", PK, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("model_call_count", sa.BigInteger(), nullable=False),
        sa.Column("next_seq", sa.BigInteger(), nullable=False),
        sa.Column("manager_state", PAYLOAD, nullable=True),
        sa.Column("agent_state", PAYLOAD, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["cl_sessions.session_id"],
            name=op.f("fk_cl_conversations_session_id_cl_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_conversations")),
        sa.UniqueConstraint("session_id", "agent_id", name=op.f("uq_cl_conversations_session_id_agent_id")),
    )
    op.create_table(
        "cl_entries",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", PAYLOAD, nullable=False),
        sa.Column("metadata", PAYLOAD, nullable=False),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("evicted_by", ID, nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("revision_count", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.CheckConstraint(STATUS_CHECK, name=op.f("ck_cl_entries_status")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_entries_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_entries")),
        sa.UniqueConstraint("conversation_id", "message_id", name=op.f("uq_cl_entries_conversation_id_message_id")),
    )
    # Restore reads (conversation_id, 'active') in seq order and nothing else.
    op.create_index("ix_cl_entries_conversation_id_status_seq", "cl_entries", ["conversation_id", "status", "seq"])
    op.create_table(
        "cl_reductions",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("reduction_id", ID, nullable=False),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column("strategy", ID, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("messages_before", sa.Integer(), nullable=False),
        sa.Column("messages_after", sa.Integer(), nullable=False),
        sa.Column("tokens_before", sa.BigInteger(), nullable=False),
        sa.Column("tokens_after", sa.BigInteger(), nullable=False),
        sa.Column("evicted", ID_LIST, nullable=False),
        sa.Column("revised", ID_LIST, nullable=False),
        sa.Column("summary_id", ID, nullable=True),
        sa.Column("model_call_count", sa.BigInteger(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_reductions_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_reductions")),
        sa.UniqueConstraint(
            "conversation_id", "reduction_id", name=op.f("uq_cl_reductions_conversation_id_reduction_id")
        ),
    )
    op.create_index("ix_cl_reductions_conversation_id_created_at", "cl_reductions", ["conversation_id", "created_at"])
    op.create_table(
        "cl_summaries",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("summary_id", ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("summarizer", ID, nullable=False),
        sa.Column("reduction_id", ID, nullable=False),
        sa.Column("supersedes", ID, nullable=True),
        sa.Column("superseded_by", ID, nullable=True),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("evicted_by", ID, nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.CheckConstraint(STATUS_CHECK, name=op.f("ck_cl_summaries_status")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_summaries_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_summaries")),
        sa.UniqueConstraint("conversation_id", "summary_id", name=op.f("uq_cl_summaries_conversation_id_summary_id")),
    )
    op.create_index("ix_cl_summaries_conversation_id_status_seq", "cl_summaries", ["conversation_id", "status", "seq"])
    op.create_table(
        "cl_revisions",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("original", PAYLOAD, nullable=False),
        sa.Column("reason", ID, nullable=False),
        sa.Column("reduction_id", ID, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id", "message_id"],
            ["cl_entries.conversation_id", "cl_entries.message_id"],
            name=op.f("fk_cl_revisions_conversation_id_message_id_cl_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_revisions")),
        sa.UniqueConstraint(
            "conversation_id", "message_id", "number", name=op.f("uq_cl_revisions_conversation_id_message_id_number")
        ),
    )
    op.create_table(
        "cl_summary_sources",
        sa.Column("summary_row_id", PK, nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("entry_id", ID, nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.CheckConstraint("kind IN ('message', 'summary')", name=op.f("ck_cl_summary_sources_kind")),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_summary_sources_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["summary_row_id"],
            ["cl_summaries.id"],
            name=op.f("fk_cl_summary_sources_summary_row_id_cl_summaries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("summary_row_id", "position", name=op.f("pk_cl_summary_sources")),
    )
    op.create_index(
        "ix_cl_summary_sources_conversation_id_entry_id", "cl_summary_sources", ["conversation_id", "entry_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_cl_summary_sources_conversation_id_entry_id", table_name="cl_summary_sources")
    op.drop_table("cl_summary_sources")
    op.drop_table("cl_revisions")
    op.drop_index("ix_cl_summaries_conversation_id_status_seq", table_name="cl_summaries")
    op.drop_table("cl_summaries")
    op.drop_index("ix_cl_reductions_conversation_id_created_at", table_name="cl_reductions")
    op.drop_table("cl_reductions")
    op.drop_index("ix_cl_entries_conversation_id_status_seq", table_name="cl_entries")
    op.drop_table("cl_entries")
    op.drop_table("cl_conversations")
    op.drop_table("cl_sessions")
