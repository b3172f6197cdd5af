"""Lineage (forks and copies kept under their ancestor) and the expiries of idle sessions.

Revision ID: 0005_lineage
Revises: 0004
Create Date: 2026-11-25 00:00:00

Two new tables, nothing altered.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_lineage"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ID = sa.String(length=255)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "cl_lineage",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("child_session_id", ID, nullable=False),
        sa.Column("child_agent_id", ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("ledger", sa.Text(), nullable=False),
        sa.Column("depth", sa.BigInteger(), nullable=False),
        sa.Column("at_call", sa.BigInteger(), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_lineage_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_lineage")),
    )
    op.create_index("ix_cl_lineage_conversation_id", "cl_lineage", ["conversation_id"])
    op.create_table(
        "cl_expiries",
        sa.Column("id", PK, nullable=False),
        sa.Column("session_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("expired_at", TS, nullable=False),
        sa.Column("last_write", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_expiries")),
    )
    op.create_index("ix_cl_expiries_session_id_agent_id", "cl_expiries", ["session_id", "agent_id"])


def downgrade() -> None:
    op.drop_index("ix_cl_expiries_session_id_agent_id", table_name="cl_expiries")
    op.drop_table("cl_expiries")
    op.drop_index("ix_cl_lineage_conversation_id", table_name="cl_lineage")
    op.drop_table("cl_lineage")
