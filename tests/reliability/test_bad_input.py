"""Bad input: every input is stored and read back exactly by a fresh process, or refused typed.

Hypothesis generates messages (text with control characters, quotes, NUL, lone
surrogates; nested JSON; bytes; the codec's own tag as a key), ids (empty, 10,000
characters, control characters, quotes, SQL and Redis metacharacters, ``}{``, path
separators, NUL, surrogates) and settings (window sizes, token costs). Each example is
appended in this process; an input may only be refused with one of the library's typed
errors. Afterwards a fresh Python process restores every conversation, and each must
equal what this process acknowledged -- and a canary conversation must be unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Conversation, Ledger, Message, SlidingWindowConversationManager
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.model.tokens import CharTokenCounter
from contextledger.stores.capabilities import CompleteStore, complete
from tests.reliability.conftest import SOAK, Report

EXAMPLES = 400 if SOAK else 30

NASTY = [
    "",
    "x" * 10_000,
    "'",
    '"',
    "'; DROP TABLE cl_entries; --",
    "\\",
    "%s %(x)s {0}",
    "*",
    "?",
    "[a-z]",
    "{tag}",
    "}{",
    "{",
    "contextledger:{s}:state",
    "../../etc/passwd",
    "a/b\\c",
    "\x00",
    "a\x00b",
    "\t\n\r\x1b\x7f",
    "\ud800",
    "\ud83d\ude00",
    "😀",
    "__contextledger_bytes__",
    " ",
    "NULL",
]
ids = st.one_of(
    st.sampled_from(NASTY), st.text(min_size=1, max_size=40), st.text(st.characters(codec="utf-8"), min_size=1)
)
surrogate_text = st.builds(lambda a, b: a + "\ud83d" + b, st.text(max_size=5), st.text(max_size=5))
texts = st.one_of(st.text(max_size=200), st.sampled_from(NASTY), surrogate_text)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.one_of(st.text(max_size=10), st.sampled_from(NASTY[:24])), children, max_size=4)
    ),
    max_leaves=12,
)
blocks = st.one_of(
    st.builds(lambda t: {"text": t}, texts),
    st.builds(lambda v: {"json": v}, json_values),
    st.builds(lambda b: {"image": {"format": "png", "source": {"bytes": b}}}, st.binary(max_size=40)),
)
messages = st.builds(
    lambda role, content, metadata, mid: {"role": role, "content": content, "metadata": metadata, "id": mid},
    st.sampled_from(["user", "assistant"]),
    st.lists(blocks, min_size=1, max_size=3),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    st.one_of(st.none(), ids),
)
examples = st.fixed_dictionaries(
    {
        "session_id": ids,
        "agent_id": st.one_of(st.just("default"), ids),
        "messages": st.lists(messages, min_size=1, max_size=3),
        "state": st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=3)),
        "window": st.integers(min_value=-2, max_value=6),
        "per_message": st.integers(min_value=-2, max_value=6),
    }
)


def _target(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'bad-input.db'}", {}
    if backend == "postgres":
        url: str = request.getfixturevalue("postgres_ledger_url")
        return url, {}
    url = request.getfixturevalue("redis_url")
    return url, {"key_prefix": f"bad-{uuid.uuid4().hex[:8]}"}


def _canary() -> list[Message]:
    return [Message.user("canary question", message_id="canary-1"), Message.assistant("answer", message_id="canary-2")]


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_hostile_input_round_trips_or_is_refused_typed(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, report: Report
) -> None:
    url, options = _target(backend, request, tmp_path)
    expected: dict[tuple[str, str], list[Message]] = {}
    states: dict[tuple[str, str], Any] = {}
    outcomes: Counter[str] = Counter()
    serial = [0]
    with Ledger.connect(url, **options) as ledger:
        store: CompleteStore = complete(ledger.store, "tests")
        canary = Conversation(store, "canary")
        canary.append(*_canary())

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
            database=None,
        )
        @given(example=examples)
        def run(example: dict[str, Any]) -> None:
            key = (example["session_id"], example["agent_id"])
            try:
                manager = SlidingWindowConversationManager(window_size=example["window"])
                counter = CharTokenCounter(per_message=example["per_message"])
            except ConfigurationError:
                outcomes["settings refused"] += 1
                manager, counter = None, None
            try:
                conv = Conversation(store, *key, manager=None, token_counter=counter)
            except ConfigurationError:
                outcomes["id refused"] += 1
                return
            assert manager is None or manager.window_size >= 1
            built: list[Message] = []
            for raw in example["messages"]:
                serial[0] += 1  # ids stay hostile but never repeat: a repeat is a different test
                extra = {"message_id": f"{raw['id']}#{serial[0]}"} if raw["id"] is not None else {}
                try:
                    built.append(Message(role=raw["role"], content=raw["content"], metadata=raw["metadata"], **extra))
                except InvalidMessage:
                    outcomes["message refused"] += 1
            if not built:
                return
            try:
                conv.append(*built)
            except (InvalidMessage, ConfigurationError) as exc:
                outcomes[f"append refused ({type(exc).__name__})"] += 1
                return
            expected.setdefault(key, []).extend(e.message for e in list(conv.view)[-len(built) :])
            outcomes["stored"] += 1
            if example["state"] is not None:
                try:
                    conv.set_agent_state(example["state"])
                    states[key] = conv.agent_state
                except InvalidMessage:
                    outcomes["state refused"] += 1

        run()
    keys = [["canary", "default"], *[list(k) for k in expected]]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"url": url, "options": options, "keys": keys}))
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.readback", str(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    restored = json.loads(done.stdout)
    views = restored["views"]
    assert [Message.from_record(r) for r in views[0]] == _canary(), "the canary changed"
    for (key, messages_), view, state in zip(expected.items(), views[1:], restored["agent_states"][1:], strict=True):
        assert view is not None, f"conversation {key!r} lost"
        assert [Message.from_record(r) for r in view] == messages_, f"conversation {key!r} differs after restore"
        if key in states:
            assert state == states[key]
    assert outcomes["stored"] > 0
    report(f"bad-input/{backend}: {EXAMPLES} examples, {dict(sorted(outcomes.items()))}, canary unchanged")
