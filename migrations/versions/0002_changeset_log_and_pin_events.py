"""Exactly-once commits and pin history: the changeset log and pin events.

Revision ID: 0002
Revises: 0001
Create Date: 2026-02-01 00:00:00

Two new tables, nothing altered: a ledger written by 0.1 reads unchanged (its
conversations simply have no logged changesets or pin events before the upgrade).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ID = sa.String(length=255)
CHANGESET_ID = sa.String(length=64)
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "cl_changesets",
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("version", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("changeset_id", CHANGESET_ID, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_changesets_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("conversation_id", "version", name=op.f("pk_cl_changesets")),
    )
    op.create_table(
        "cl_pin_events",
        sa.Column("id", PK, nullable=False),
        sa.Column("conversation_id", PK, nullable=False),
        sa.Column("entry_id", ID, nullable=False),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("changeset_id", CHANGESET_ID, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["cl_conversations.id"],
            name=op.f("fk_cl_pin_events_conversation_id_cl_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cl_pin_events")),
    )
    op.create_index("ix_cl_pin_events_conversation_id_id", "cl_pin_events", ["conversation_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_cl_pin_events_conversation_id_id", table_name="cl_pin_events")
    op.drop_table("cl_pin_events")
    op.drop_table("cl_changesets")
