"""Pin event positions: each pin event's index within its changeset, so pin history pages.

Revision ID: 0007
Revises: 0006
Create Date: 2026-05-01 00:00:00

One column and one index on ``cl_pin_events``. A changeset's pin events share their
stamps (time, version); ``position`` tells them apart, so ``(created_at, agent_id,
version, position)`` is a unique order key a page can start after. Rows written before
get their index among the rows of their changeset, in the order they were written (by
``id``), which is the order the library wrote them in. The index that served the old
order (by ``id``) gives way to one on the new order key.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ORDER = ["conversation_id", "created_at", "version", "position"]


def upgrade() -> None:
    with op.batch_alter_table("cl_pin_events", recreate="never") as batch:
        batch.add_column(sa.Column("position", sa.Integer(), server_default="0", nullable=False))
    op.execute(
        "UPDATE cl_pin_events SET position = (SELECT count(*) FROM cl_pin_events AS earlier"
        " WHERE earlier.conversation_id = cl_pin_events.conversation_id"
        " AND earlier.changeset_id = cl_pin_events.changeset_id AND earlier.id < cl_pin_events.id)"
    )
    op.drop_index("ix_cl_pin_events_conversation_id_id", table_name="cl_pin_events")
    op.create_index("ix_cl_pin_events_conversation_id_created_at_version_position", "cl_pin_events", _ORDER)


def downgrade() -> None:
    op.drop_index("ix_cl_pin_events_conversation_id_created_at_version_position", table_name="cl_pin_events")
    op.create_index("ix_cl_pin_events_conversation_id_id", "cl_pin_events", ["conversation_id", "id"])
    # In place (SQLite >= 3.35 drops columns): a recreated table would lose nothing here,
    # but in place keeps the downgrade as cheap as the upgrade.
    with op.batch_alter_table("cl_pin_events", recreate="never") as batch:
        batch.drop_column("position")
