"""Imports that cannot corrupt: a whole file is checked before anything is written, on every backend.

Each case the import used to accept or half-apply -- duplicate seqs, a ``next_seq``
below its messages, ``evicted_by`` naming no reduction, summaries replacing unknown ids,
a negative ``model_call_count``, megabyte ids, markup in ids, a 100,000-deep JSON line,
NaN in the second conversation of a file -- is refused with ``InvalidExport`` naming the
line and the field, and the target is unchanged. A Hypothesis property mutates valid
exports (fields set to hostile values, lines dropped, repeated, swapped, truncated, made
deep or NaN) and checks on every backend: either the import succeeds and reading the
conversations back gives exactly the imported records, whose export is valid again; or
it is refused typed (``InvalidExport``, or ``ConversationExists`` for a conversation the
target holds differently) and the target is byte-for-byte unchanged.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from redis import Redis, RedisCluster
from sqlalchemy import inspect, text
from typer.testing import CliRunner

from contextledger.cli import ExitCode, app
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Changeset
from contextledger.errors import ConversationExists, InvalidExport
from contextledger.history.transfer import (
    conversation_lines,
    dump_lines,
    import_lines,
    list_sessions,
    read_conversation,
    records_from_lines,
)
from contextledger.model.messages import Message
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from contextledger.stores.redis import RedisStore
from contextledger.stores.sql import SQLStore
from contextledger.testing.transfer import rich_conversation
from tests.soak import examples


def base_lines() -> list[dict[str, Any]]:
    """A valid export of two conversations: a rich one (one of everything) and a second agent's."""
    source = MemoryStore()
    first = rich_conversation(source, "base", "main")
    second = rich_conversation(source, "base", "helper")
    return [*conversation_lines(first), *conversation_lines(second)]


BASE = base_lines()


def renamed(lines: list[dict[str, Any]], session_id: str) -> list[dict[str, Any]]:
    """``lines`` with every ``session_id`` replaced (each example imports a session of its own)."""
    return [{**line, "session_id": session_id} if line.get("session_id") == "base" else dict(line) for line in lines]


def to_text(lines: Sequence[dict[str, Any] | str]) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n" for line in lines)


# -- what the target holds, byte for byte ------------------------------------------------------


def fingerprint(store: CompleteStore) -> Any:
    """Everything the store holds: every row of every ledger table, every key and its bytes, or every record."""
    if isinstance(store, SQLStore):
        with store.engine.connect() as conn:
            tables = sorted(t for t in inspect(conn).get_table_names() if t.startswith("cl_"))
            return {t: sorted(map(repr, conn.execute(text(f"SELECT * FROM {t}")).all())) for t in tables}
    if isinstance(store, RedisStore):
        scheme, _, rest = store.url.partition("://")  # the test servers have no password: nothing masked
        client = (
            RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
            if scheme.endswith("+cluster")
            else Redis.from_url(store.url)
        )
        try:
            keys: list[bytes] = []
            for pattern in (f"{{{store.key_prefix}:*", f"{store.key_prefix}:*"):
                keys += client.scan_iter(match=pattern, count=1000)
            return {key: client.dump(key) for key in sorted(set(keys))}
        finally:
            client.close()
    return {
        s: dump_lines(c for a in store.agents(s) if (c := read_conversation(store, s, a))) for s in list_sessions(store)
    }


# -- the cases of the report -------------------------------------------------------------------


def _set(kind: str, field: str, value: Any, nth: int = 0) -> Callable[[list[dict[str, Any]]], None]:
    def change(lines: list[dict[str, Any]]) -> None:
        matching = [line for line in lines if line["type"] == kind]
        target = matching[nth]
        if "." in field:
            outer, inner = field.split(".", 1)
            target[outer] = {**target[outer], inner: value}
        else:
            target[field] = value

    return change


def _duplicate_seq(lines: list[dict[str, Any]]) -> None:
    messages = [line for line in lines if line["type"] == "message"]
    messages[1]["seq"] = messages[0]["seq"]


CASES: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    "duplicate seq": (_duplicate_seq, "seq"),
    "next_seq below its messages": (_set("conversation", "next_seq", 1), "seq"),
    "evicted_by naming no reduction": (_set("message", "evicted_by", "no-such-reduction", nth=6), "evicted_by"),
    "summary replacing an unknown id": (_set("summary", "replaces", ["nobody"]), "replaces"),
    "negative model_call_count": (_set("conversation", "model_call_count", -1), "model_call_count"),
    "negative tokens": (_set("message", "tokens", -5), "tokens"),
    "megabyte message id": (_set("message", "message.message_id", "m" * 1_000_000), "message_id"),
    "megabyte session id": (_set("conversation", "session_id", "s" * 1_000_000), "session_id"),
    "markup in a reduction id": (_set("reduction", "reduction_id", 'x"><img src=x onerror=alert(1)>'), "reduction_id"),
    "control character in an agent id": (_set("conversation", "agent_id", "a\x1b[31m"), "agent_id"),
    "a timestamp without a timezone": (_set("reduction", "created_at", "2025-01-01T00:00:00"), "created_at"),
    "a lone surrogate in a summary": (_set("summary", "content", "\ud800"), "content"),
    "a version after the conversation's": (_set("pin", "version", 10_000), "version"),
    "a pin of an unknown entry": (_set("pin", "entry_id", "nobody"), "entry_id"),
    "a token count no column holds": (_set("message", "tokens", 2**40), "tokens"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_reported_case_is_refused_naming_line_and_field(store: CompleteStore, case: str) -> None:
    change, field = CASES[case]
    lines = renamed(BASE, f"case-{uuid.uuid4().hex[:8]}")
    change(lines)
    before = fingerprint(store)
    with pytest.raises(InvalidExport) as info:
        import_lines(store, to_text(lines).split("\n"))
    assert info.value.line is not None
    assert str(info.value).startswith(f"line {info.value.line}: ")
    assert info.value.field is not None
    assert field in info.value.field or field in str(info.value), str(info.value)
    assert fingerprint(store) == before


def test_a_deep_line_is_refused_typed(store: CompleteStore) -> None:
    deep = '{"type": "message", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    lines: list[dict[str, Any] | str] = [*renamed(BASE, f"deep-{uuid.uuid4().hex[:8]}")]
    lines.insert(3, deep)
    before = fingerprint(store)
    with pytest.raises(InvalidExport, match=r"^line 4: "):
        import_lines(store, to_text(lines).split("\n"))
    assert fingerprint(store) == before


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_in_the_second_conversation_writes_nothing(store: CompleteStore, constant: str) -> None:
    session = f"nan-{uuid.uuid4().hex[:8]}"
    lines: list[dict[str, Any] | str] = [*renamed(BASE, session)]
    second = next(i for i, line in enumerate(lines) if isinstance(line, dict) and line["agent_id"] == "helper")
    state = json.dumps(lines[second], ensure_ascii=False)
    lines[second] = state.replace('"model_call_count":', f'"manager_state": {{"x": {constant}}}, "model_call_count":')
    before = fingerprint(store)
    with pytest.raises(InvalidExport, match=f"^line {second + 1}: .*{constant}"):
        import_lines(store, to_text(lines).split("\n"))
    assert fingerprint(store) == before
    assert store.agents(session) == []


def test_the_cli_writes_nothing_from_a_file_wrong_in_its_second_conversation(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'target.db'}"
    lines = renamed(BASE, "cli")
    helper = [line for line in lines if line["agent_id"] == "helper"]
    helper[2]["seq"] = helper[1]["seq"]
    dump = tmp_path / "bad.jsonl"
    dump.write_text(to_text([*lines]), encoding="utf-8")
    result = CliRunner().invoke(app, ["import", str(dump), "--url", url], catch_exceptions=False)
    assert result.exit_code == ExitCode.ERROR, result.output
    line = lines.index(helper[2]) + 1
    assert result.stderr.startswith(f"error: line {line}: conversation cli/helper: message "), result.stderr
    assert "seq" in result.stderr
    assert result.stdout == ""
    listed = CliRunner().invoke(app, ["sessions", "--url", url, "--json"], catch_exceptions=False)
    assert json.loads(listed.stdout) == []


def test_a_valid_export_still_round_trips_exactly(store: CompleteStore) -> None:
    session = f"ok-{uuid.uuid4().hex[:8]}"
    exported = to_text(renamed(BASE, session))
    outcomes = import_lines(store, exported.split("\n"))
    assert [o for _, o in outcomes] == ["imported", "imported"]
    again = dump_lines(c for a in ("main", "helper") if (c := read_conversation(store, session, a)))
    assert again == dump_lines(r for r, _ in outcomes)
    assert [o for _, o in import_lines(store, again.split("\n"))] == ["unchanged", "unchanged"]


# -- the property --------------------------------------------------------------------------------

HOSTILE: list[Any] = [
    None,
    -1,
    0,
    1,
    2**31,
    2**53,
    2**64,
    1.5,
    True,
    "",
    " padded ",
    "<script>alert(1)</script>",
    "a\u202eb",
    "a\x00b",
    "line\nbreak",
    "x" * 256,
    "\ud800",
    [],
    {},
    ["nobody"],
    "2020-01-01T00:00:00",
    "2020-01-01T00:00:00+05:00",
    "0001-01-01T00:00:00+05:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999-05:00",
    "1969-12-31T23:59:59.999999Z",
    "active",
    "evicted",
    "restore",
]
NESTED_KEYS = ["message.message_id", "message.role", "message.content", "message.metadata"]

mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 100), st.sampled_from(HOSTILE)),
    st.tuples(st.just("nested"), st.integers(0, 10_000), st.sampled_from(NESTED_KEYS), st.sampled_from(HOSTILE)),
    st.tuples(st.just("borrow"), st.integers(0, 10_000), st.integers(0, 100), st.integers(0, 10_000)),
    st.tuples(st.just("drop"), st.integers(0, 10_000)),
    st.tuples(st.just("repeat"), st.integers(0, 10_000)),
    st.tuples(st.just("swap"), st.integers(0, 10_000), st.integers(0, 10_000)),
    st.tuples(st.just("raw"), st.integers(0, 10_000), st.sampled_from(["truncate", "deep", "nan", "garbage"])),
)


def mutate(lines: list[dict[str, Any] | str], step: tuple[Any, ...]) -> None:
    """Apply one mutation in place (indices wrap around)."""
    if not lines:
        return
    kind, at = step[0], step[1] % len(lines)
    line = lines[at]
    if kind == "drop":
        del lines[at]
    elif kind == "repeat":
        lines.insert(at, line)
    elif kind == "swap":
        other = step[2] % len(lines)
        lines[at], lines[other] = lines[other], line
    elif kind == "raw":
        raw = line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)
        lines[at] = {
            "truncate": raw[: len(raw) // 2],
            "deep": raw[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}",
            "nan": raw[:-1] + ', "x": NaN}',
            "garbage": "not json",
        }[step[2]]
    elif isinstance(line, dict):
        changed = dict(line)
        if kind == "set":
            keys = sorted(changed)
            changed[keys[step[2] % len(keys)]] = step[3]
        elif kind == "nested" and isinstance(changed.get("message"), dict):
            outer, inner = step[2].split(".")
            changed[outer] = {**changed[outer], inner: step[3]}
        elif kind == "borrow":  # a value of another line: a real id, seq, time... in the wrong place
            donor = lines[step[3] % len(lines)]
            if isinstance(donor, dict):
                keys = sorted(changed)
                donor_keys = sorted(donor)
                changed[keys[step[2] % len(keys)]] = donor[donor_keys[step[2] % len(donor_keys)]]
        lines[at] = changed


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(mutation, min_size=1, max_size=3))
def test_a_mutated_export_imports_exactly_or_changes_nothing(
    store: CompleteStore, steps: list[tuple[Any, ...]]
) -> None:
    session = f"p-{uuid.uuid4().hex[:10]}"
    lines: list[dict[str, Any] | str] = [*renamed(BASE, session)]
    for step in steps:
        mutate(lines, step)
    before = fingerprint(store)
    try:
        outcomes = import_lines(store, to_text(lines).split("\n"))
    except (InvalidExport, ConversationExists) as exc:
        event(f"refused: {type(exc).__name__} ({getattr(exc, 'field', None) or '-'})")
        assert fingerprint(store) == before
        return
    event("imported")
    for records, _ in outcomes:
        again = read_conversation(store, records.session_id, records.agent_id)
        assert again is not None
        assert conversation_lines(again) == conversation_lines(records)
        # what the target now holds exports to a file that imports again
        assert records_from_lines(dump_lines([again]).split("\n")) == [again]
        # and the conversation opens: its view is restored from what was imported
        conversation = Conversation(store, records.session_id, records.agent_id)
        active = {m.message.message_id for m in records.messages if m.status == "active"}
        assert {e.entry_id for e in conversation.view if e.kind == "message"} == active


def test_an_entry_erased_then_pruned_keeps_both_tombstones(store: CompleteStore) -> None:
    from datetime import timedelta

    from contextledger import Ledger, Message
    from contextledger.core.changeset import ReductionPlan

    session = f"tomb-{uuid.uuid4().hex[:8]}"
    with Ledger(MemoryStore()) as source:
        chat = source.conversation(session)
        first, *rest = [Message.user("secret"), Message.assistant("ok"), Message.user("more"), Message.assistant("k")]
        chat.append(first, *rest)
        source.erase(session, first.message_id, reason="asked to forget")
        evict = (first.message_id, rest[0].message_id)
        chat.apply_plan(lambda _v: ReductionPlan(strategy="w", evict=evict), trigger="manual", as_given=True)
        source.prune(older_than=timedelta(0), session_id=session)
        exported = dump_lines(source.export_records(session))
    assert sorted(t.reason for t in records_from_lines(exported.split("\n"))[0].tombstones) == [
        "asked to forget",
        "prune",
        "prune",
    ]
    import_lines(store, exported.split("\n"))
    again = read_conversation(store, session, "default")
    assert again is not None
    assert dump_lines([again]) == exported


def test_an_export_written_before_pin_positions_imports_them_numbered(store: CompleteStore) -> None:
    """Pin lines without ``position`` (0.2 exports) get their index within their changeset, in file order."""
    source = MemoryStore()
    chat = Conversation(source, "pins", "a")
    ids = [m.message_id for m in chat.append(*(Message.user(f"m{i}") for i in range(4)))]
    chat.pin(ids[0])
    source.commit(
        Changeset(session_id="pins", agent_id="a", expected_version=chat.version, pins=dict.fromkeys(ids[1:], True))
    )
    records = read_conversation(source, "pins", "a")
    assert records is not None
    lines = conversation_lines(records)
    old = [{k: v for k, v in line.items() if not (line["type"] == "pin" and k == "position")} for line in lines]
    assert old != lines
    outcomes = import_lines(store, to_text(old).split("\n"))
    assert [o for _, o in outcomes] == ["imported"]
    assert [(e.entry_id, e.position) for e in store.pin_history("pins")] == [
        (ids[0], 0),
        (ids[1], 0),
        (ids[2], 1),
        (ids[3], 2),
    ]
    assert store.pin_history("pins") == source.pin_history("pins")
