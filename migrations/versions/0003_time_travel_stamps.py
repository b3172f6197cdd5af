"""Time travel: call and version stamps on entries, reductions and pin events; undo's restored ids.

Revision ID: 0003
Revises: 0002
Create Date: 2026-03-01 00:00:00

Columns only, nothing dropped. Rows written before carry no stamps: entries and pin
events get 0 (taken as visible from the first model call), and a reduction gets the
call it reached, derived from its model-call count and trigger -- a ``per_turn`` or
``proactive`` reduction ran before the call it counted, any other one after it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Types spelled out here (not imported from the library) so this migration never changes.
ID_LIST = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _stamps(table: str) -> None:
    with op.batch_alter_table(table) as batch:
        batch.add_column(sa.Column("from_call", sa.BigInteger(), server_default="0", nullable=False))
        batch.add_column(sa.Column("version", sa.BigInteger(), server_default="0", nullable=False))


def upgrade() -> None:
    _stamps("cl_entries")
    _stamps("cl_pin_events")
    _stamps("cl_reductions")
    with op.batch_alter_table("cl_reductions") as batch:
        batch.add_column(sa.Column("restored", ID_LIST, nullable=True))
    op.execute(
        "UPDATE cl_reductions SET from_call = model_call_count"
        " + CASE WHEN \"trigger\" IN ('per_turn', 'proactive') THEN 0 ELSE 1 END"
    )


def downgrade() -> None:
    with op.batch_alter_table("cl_reductions") as batch:
        batch.drop_column("restored")
    for table in ("cl_reductions", "cl_pin_events", "cl_entries"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("version")
            batch.drop_column("from_call")
