"""Entries mapped by name: the builders generated from a record's fields, and the mappings derived from them.

A field added to ``HistoryEntry`` must reach every store's reads and appends with its
column and nothing else; these tests hold the pieces that make that so to the record's
fields, so a mapping that drifts from the record fails here (and at import).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from contextledger.core.changeset import Changeset
from contextledger.model.messages import Message
from contextledger.model.records import HistoryEntry
from contextledger.model.trusted import builder
from contextledger.stores.redis import codec
from contextledger.stores.sql import fields
from contextledger.stores.sql.read import records


class _Sample(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    count: int = 0
    note: str | None = None


def test_a_builder_takes_exact_values_as_they_are_and_validates_the_rest() -> None:
    build = builder(_Sample, ("name",), start=1)
    fast = build("x", ("ignored", 3, None))
    assert fast == _Sample(name="x", count=3)
    assert fast.model_fields_set == {"name", "count", "note"}
    assert build("x", ("ignored", True, None)) == _Sample(name="x", count=True)  # validated: bool is not int
    with pytest.raises(ValidationError):
        build("x", ("ignored", "three", None))
    with pytest.raises(ValidationError):
        build("x", ("ignored", 1, 2))


def test_a_builder_refuses_names_and_types_it_cannot_check() -> None:
    with pytest.raises(TypeError, match="no fields"):
        builder(_Sample, ("nope",))

    class Odd(BaseModel):
        values: list[int]

    with pytest.raises(TypeError, match="no exact check"):
        builder(Odd, ("values",))

    class Clash(BaseModel):
        row: int

    with pytest.raises(TypeError, match="generated code"):
        builder(Clash, ("row",))


def test_the_history_row_is_the_message_then_every_other_entry_field_in_order() -> None:
    others = [n for n in HistoryEntry.model_fields if n not in {"session_id", "agent_id", "message"}]
    expected = ("message_id", "role", "content", "meta", *others)
    assert expected == records.HISTORY_COLUMNS
    assert fields.ENTRIES.fields == tuple(others)


def test_an_append_writes_every_stored_field_once() -> None:
    cs = Changeset(session_id="s", agent_id="a", expected_version=1)
    assert tuple(cs.stamps(None)) == fields.APPENDED_STAMPS
    written = [*fields.APPENDED_FROM_ENTRY, *fields.APPENDED_CONSTANTS, *fields.APPENDED_STAMPS]
    assert len(written) == len(set(written))
    stored = {fields.ENTRIES.renamed.get(n, n) for n in fields.ENTRIES.fields}
    assert stored <= set(written)  # every stored entry field has its value on append
    # A new entry is active; every other field it does not take from the entry or the commit holds its default.
    assert fields.APPENDED_CONSTANTS["status"] == "active"
    defaults = {n: f.default for n, f in HistoryEntry.model_fields.items() if n in fields.APPENDED_CONSTANTS}
    assert {**defaults, "status": "active"} == fields.APPENDED_CONSTANTS
    assert {"evicted_by", "revision_count"} <= set(defaults)


def test_the_redis_record_holds_the_immutable_fields_by_name_stamps_last() -> None:
    entry = HistoryEntry(
        session_id="s",
        agent_id="a",
        seq=4,
        message=Message.user("q"),
        status="evicted",
        pinned=False,
        tokens=3,
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
        evicted_by="r",
        from_call=2,
        version=7,
    )
    values: dict[str, Any] = codec.record_values(entry)
    assert list(values)[-3:] == ["created_at", "from_call", "version"]  # the time-travel script reads the end
    assert set(values) == set(codec.RECORD_FIELDS)
    record = {**entry.message.to_record(), **values}
    content = codec.dumps(record.pop("content"))
    row = codec.MessageRow.decode("m", codec.dumps(record).encode(), content.encode(), {"e|m": b"r"})
    assert row.history_entry("s", "a") == entry.model_copy(update={"message": row.message})
