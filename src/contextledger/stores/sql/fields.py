"""Records and rows mapped by field name: a record kind's stored fields are declared once, by the record.

A record kind stored one row per record (a pin event...) is a :class:`Stored`: its pydantic
record, its table's row class, the few fields named differently in the table, and the
fields the row does not hold (the session and agent, which its conversation gives). Every
other field of the record is a column of the same name, so the statements select
:meth:`Stored.columns` (labelled with the fields' names, so a row's mapping is the
record's fields), inserts take :meth:`Stored.values`, and a field added to the record
reaches every SQL path with its column and nothing else.

Whether a record field lacks its column is checked when the mapping is made (at
import): a field added to a record without its column fails loudly, not at the first
query.

Adding a field to ``HistoryEntry`` (stored per entry, with a plain default) takes: the
field (``model/records.py``), its column (``models.py``) and a migration, the schema
head the stdlib reader expects (``reader.py``, and the head ``tests/sql/test_migrations.py``
checks), the memory store's row (``stores/memory/data.py``), and the generated SQLite
SQL (``scripts/generate-sqlite-sql``). Everything else follows by name: the history
listing and its decoder, the three append paths (:data:`APPENDED_COLUMNS`), export and
import, and the Redis entry record (``stores/redis/encode.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ColumnElement, inspect

from contextledger.model.messages import encode_blocks
from contextledger.model.records import (
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SummaryEntry,
    Tombstone,
)
from contextledger.stores.sql.models import (
    Base,
    EntryRow,
    LineageRow,
    PinEventRow,
    ReductionRow,
    RevisionRow,
    SummaryRow,
    TombstoneRow,
)

__all__ = [
    "APPENDED_COLUMNS",
    "APPENDED_CONSTANTS",
    "APPENDED_FROM_ENTRY",
    "APPENDED_STAMPS",
    "ENTRIES",
    "LINEAGE",
    "PIN_EVENTS",
    "REDUCTIONS",
    "REVISIONS",
    "SUMMARIES",
    "TOMBSTONES",
    "Stored",
]


@dataclass(frozen=True)
class Stored:
    """How one record kind is stored, row per record.

    Attributes:
        record: The pydantic record.
        row: The table's row class.
        renamed: Record field -> column, for the fields whose column has another name.
        outside: Record fields the row does not hold (given by the row's conversation,
            or kept in another table).
        encode: Record field -> what turns its value into the column's (default: as is).
        fields: The stored fields, in the record's order (derived).
    """

    record: type[BaseModel]
    row: type[Base]
    renamed: Mapping[str, str] = field(default_factory=dict)
    outside: frozenset[str] = frozenset({"session_id", "agent_id"})
    encode: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    fields: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        """Derive the stored fields and check each has its column.

        Raises:
            TypeError: A stored field has no column in the row's table.
        """
        names = tuple(name for name in self.record.model_fields if name not in self.outside)
        columns = set(inspect(self.row).columns.keys())
        missing = [name for name in names if self.renamed.get(name, name) not in columns]
        if missing:
            raise TypeError(f"{self.record.__name__} fields without a column in {self.row.__name__}: {missing}")
        object.__setattr__(self, "fields", names)

    def column(self, name: str) -> ColumnElement[Any]:
        """The column of the stored field ``name``."""
        found: ColumnElement[Any] = getattr(self.row, self.renamed.get(name, name))
        return found

    def columns(self) -> list[ColumnElement[Any]]:
        """The stored fields' columns, each labelled with its field's name (to select)."""
        return [self.column(name).label(name) for name in self.fields]

    def values(self, record: BaseModel) -> dict[str, Any]:
        """The stored fields of ``record`` by column name (to insert; add the row's keys)."""
        encode = self.encode
        return {
            self.renamed.get(name, name): encode[name](value) if name in encode else value
            for name in self.fields
            for value in (getattr(record, name),)
        }


ENTRIES = Stored(HistoryEntry, EntryRow, outside=frozenset({"session_id", "agent_id", "message"}))
"""Message entries in ``cl_entries``, but the message, whose record fills the id, role, content and metadata columns."""

APPENDED_FROM_ENTRY = ("seq", "message_id", "role", "content", "metadata", "pinned", "tokens")
"""The ``cl_entries`` columns an appended entry takes from its view entry and message, in this order."""
APPENDED_STAMPS = ("created_at", "from_call", "version")
"""The entry fields an append stamps, from the commit (``Changeset.stamps``: the one place they are made)."""
APPENDED_STATUS = {"status": "active"}
"""What an appended entry holds for the stored fields without a default."""


def _appended_constants() -> dict[str, Any]:
    """Column -> value every appended entry starts with: :data:`APPENDED_STATUS`, then the record's defaults.

    Raises:
        TypeError: A stored entry field has no default and no value on append (a new
            field must say what an appended entry holds).
    """
    out: dict[str, Any] = {}
    for name in ENTRIES.fields:
        if name in APPENDED_FROM_ENTRY or name in APPENDED_STAMPS:
            continue
        info = HistoryEntry.model_fields[name]
        if name in APPENDED_STATUS:
            out[ENTRIES.renamed.get(name, name)] = APPENDED_STATUS[name]
        elif info.is_required() or info.default_factory is not None:
            raise TypeError(f"HistoryEntry.{name} has no plain default: say what an appended entry holds")
        else:
            out[ENTRIES.renamed.get(name, name)] = info.default
    return out


APPENDED_CONSTANTS = _appended_constants()
"""The ``cl_entries`` columns every appended entry starts with, by name, and their values (the record's defaults)."""
APPENDED_COLUMNS = ("conversation_id", *APPENDED_FROM_ENTRY, *APPENDED_CONSTANTS, *APPENDED_STAMPS)
"""Every column an appended entry's ``INSERT`` writes, in order (the general path and both hot paths)."""
PIN_EVENTS = Stored(PinEvent, PinEventRow, renamed={"at": "created_at"})
"""Pin events in ``cl_pin_events`` (``at`` is the ``created_at`` column)."""
REDUCTIONS = Stored(Reduction, ReductionRow)
"""Reductions in ``cl_reductions``."""
SUMMARIES = Stored(SummaryEntry, SummaryRow, outside=frozenset({"session_id", "agent_id", "replaces"}))
"""Summaries in ``cl_summaries`` (what each replaced is in ``cl_summary_sources``, in order)."""
REVISIONS = Stored(Revision, RevisionRow, encode={"original": encode_blocks})
"""Revisions in ``cl_revisions`` (the original blocks stored as their JSON-safe records)."""


def _ledger_column(ledger: str | None) -> str:
    """The ``ledger`` column of a lineage link: empty for this ledger (``None`` in the record)."""
    return ledger or ""


LINEAGE = Stored(LineageLink, LineageRow, encode={"ledger": _ledger_column})
"""Lineage links in ``cl_lineage``, under their ancestor's conversation (``ledger`` empty for this ledger)."""
TOMBSTONES = Stored(Tombstone, TombstoneRow, renamed={"erased_at": "created_at"})
"""Tombstones in ``cl_tombstones`` (``erased_at`` is the ``created_at`` column)."""
