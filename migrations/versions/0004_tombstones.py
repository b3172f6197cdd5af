"""Erasure and retention: the tombstones of erased and pruned entries.

Revision ID: 0004
Revises: 0003
Create Date: 2026-03-15 00:00:00

One new table, nothing altered.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ID = sa.String(length=255)
TS = sa.DateTime(timezone=True)
ID_LIST = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "cl_tombstones",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("entry_id", ID, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("summaries", ID_LIST, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_tombstones_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_tombstones")),
    )
    op.create_index("ix_cl_tombstones_conversation_id_entry_id", "cl_tombstones", ["conversation_id", "entry_id"])


def downgrade() -> None:
    op.drop_index("ix_cl_tombstones_conversation_id_entry_id", table_name="cl_tombstones")
    op.drop_table("cl_tombstones")
