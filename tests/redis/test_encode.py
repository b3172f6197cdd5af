"""The commit's ARGV, written from pieces, is byte for byte what dumping each record's dict gives.

:func:`~contextledger.stores.redis.encode.commit_args` puts an appended message's record
together from texts made once (per process, per commit, per message); the reference
here builds the record as a dict and dumps it whole, as the store did before. Stored
records are read by every version of the library, so the texts must not differ.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.core.changeset import Changeset
from contextledger.errors import InvalidMessage
from contextledger.model.jsonvalues import encode_value
from contextledger.model.messages import Message
from contextledger.model.records import HistoryEntry, ViewEntry
from contextledger.stores.redis import codec, encode
from contextledger.stores.redis.keys import view_score

_HEADER = 16  # scripts.COMMIT_FIXED_ARGS

texts = st.text(max_size=30) | st.sampled_from(['"', "\\", "\x00", "😀", "\u2028", "__contextledger_bytes__", "~"])
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
    | st.binary(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)
message_ids = st.text(min_size=1, max_size=20).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))


@st.composite
def appends(draw: st.DrawFn) -> tuple[ViewEntry, ...]:
    count = draw(st.integers(min_value=1, max_value=4))
    ids = draw(st.lists(message_ids, min_size=count, max_size=count, unique=True))
    first = draw(st.integers(min_value=0, max_value=2**40))
    entries = []
    for n, message_id in enumerate(ids):
        message = Message(
            message_id=message_id,
            role=draw(st.sampled_from(["user", "assistant"])),
            content=[{"text": draw(texts)}, {"data": draw(json_values)}],
            metadata=draw(st.dictionaries(texts, json_values, max_size=3)),
        )
        tokens = draw(st.integers(min_value=0, max_value=10**9))
        entries.append(ViewEntry(entry_id=message_id, seq=first + n, message=message, tokens=tokens))
    return tuple(entries)


def _reference_appends(changeset: Changeset, stamp: str) -> list[str]:
    """The appends' part of the ARGV as the store built it from dicts."""
    defaults = {name: value for name, value in encode._APPENDED_DEFAULTS.items()}
    out: list[str] = []
    for entry in changeset.appends:
        message = entry.message
        record = {
            "message_id": message.message_id,
            "role": message.role,
            "metadata": encode_value(message.metadata),
            "seq": entry.seq,
            "tokens": entry.tokens,
            **defaults,
            **changeset.stamps(stamp),
        }
        out += [
            entry.entry_id,
            str(view_score(entry.seq, summary=False)),
            encode.dumps(record),
            encode.dumps(encode_value(message.content)),
        ]
    return out


@given(
    entries=appends(),
    version=st.integers(min_value=1, max_value=2**31),
    from_call=st.integers(min_value=0, max_value=10**6),
)
def test_the_records_are_the_dumped_dicts(entries: tuple[ViewEntry, ...], version: int, from_call: int) -> None:
    changeset = Changeset(session_id="s", agent_id="a", expected_version=version, appends=entries, from_call=from_call)
    now = datetime(2026, 11, 26, 18, 30, 1, 123456, tzinfo=UTC)
    args = encode.commit_args(changeset, now)
    width = 4 * len(entries)
    assert args[_HEADER : _HEADER + width] == _reference_appends(changeset, now.isoformat())
    assert args[_HEADER + width :] == ["0"]  # no restore
    for record in args[_HEADER + 2 : _HEADER + width : 4]:
        stored = codec.loads(record)
        assert list(stored)[-3:] == ["created_at", "from_call", "version"]  # the time-travel script reads them last
        assert stored["version"] == version + 1


def test_a_record_holds_every_record_field_in_order() -> None:
    assert [*encode.RECORD_FIELDS] == [name for name in HistoryEntry.model_fields if name not in encode.NOT_IN_RECORD]
    message = Message.user("hi", metadata={"k": b"\x00\xff"})
    changeset = Changeset(
        session_id="s",
        agent_id="a",
        expected_version=3,
        appends=(ViewEntry(entry_id=message.message_id, seq=7, message=message, tokens=2),),
    )
    record = codec.loads(encode.commit_args(changeset, datetime(2026, 1, 1, tzinfo=UTC))[_HEADER + 2])
    assert list(record) == ["message_id", "role", "metadata", *encode._RECORD_ORDER]
    assert record["metadata"] == encode_value(message.metadata)  # bytes tagged


@pytest.mark.parametrize("where", ["content", "metadata"])
def test_a_value_json_cannot_hold_is_refused_before_anything_is_sent(where: str) -> None:
    message = Message.user("x")
    bad: dict[str, Any] = {"content": [{"text": "x", "n": float("nan")}]} if where == "content" else {}
    if where == "metadata":
        bad = {"metadata": {"n": float("inf")}}
    # a message holding NaN can only be made without validation (Message refuses it)
    broken = message.model_copy(update=bad)
    changeset = Changeset(
        session_id="s",
        agent_id="a",
        expected_version=1,
        appends=(ViewEntry(entry_id=message.message_id, seq=1, message=broken, tokens=1),),
    )
    with pytest.raises(InvalidMessage, match="cannot be stored as JSON"):
        encode.commit_args(changeset, datetime(2026, 1, 1, tzinfo=UTC))


def test_dumps_refuses_what_json_cannot_hold_with_the_standard_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for value, reason in (
        (cyclic, "Circular reference"),
        (b"x", "not JSON serializable"),
        (float("nan"), "Out of range"),
    ):
        with pytest.raises(InvalidMessage, match=reason):
            encode.dumps(value)
    assert encode.dumps({"a": [1, 2.5, None, "é"]}) == '{"a":[1,2.5,null,"\\u00e9"]}'
