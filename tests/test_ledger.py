"""The ``Ledger`` entry point: opening URLs, query arguments, pin history, closing, deleted sessions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from contextledger import Ledger, Message, ReductionPlan
from contextledger.conversation.pins import handle_pin_message_tool
from contextledger.errors import ConfigurationError, LedgerClosed, SessionDeleted
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import CompleteStore
from tests.plugins.redis import purge


def test_eviction_query_arguments_are_checked(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    conversation = ledger.conversation("s")
    conversation.append(Message.user("a"), Message.user("b"), Message.user("c"))
    conversation.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="per_turn")
    time.sleep(0.01)
    cut = utcnow()
    time.sleep(0.01)
    conversation.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="per_turn")
    assert len(ledger.evictions("s", trigger="per_turn")) == 2
    # A typo in the trigger is an error, not an empty answer.
    with pytest.raises(ConfigurationError, match="unknown trigger 'per-turn'"):
        ledger.evictions("s", trigger="per-turn")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="since must be a datetime"):
        ledger.evictions("s", since="2h")  # type: ignore[arg-type]
    # A naive datetime means UTC.
    naive: datetime = cut.replace(tzinfo=None)
    assert [e.entry_id for e in ledger.evictions("s", since=naive)] == [
        e.entry_id for e in ledger.evictions("s", since=cut)
    ]
    assert len(ledger.evictions("s", since=naive)) == 1


@pytest.mark.parametrize("url", ["memory://", "sqlite:///{tmp}/options.db"])
def test_an_option_the_backend_does_not_take_is_a_configuration_error(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigurationError, match="unsupported option") as info:
        Ledger.connect(url.format(tmp=tmp_path), no_such_option=1)
    assert "no_such_option" in str(info.value)


def test_a_url_given_to_the_constructor_points_to_connect() -> None:
    with pytest.raises(ConfigurationError, match=r"Ledger.connect\('sqlite:///agents.db'\)"):
        Ledger("sqlite:///agents.db")  # type: ignore[arg-type]


# -- lifecycle: pin history, closing, deleted sessions (every backend reached by URL) ------

URL_BACKENDS = ["sqlite", "postgres", "redis", "redis_cluster"]


@pytest.fixture(params=URL_BACKENDS)
def connect(request: pytest.FixtureRequest) -> Iterator[Callable[[], Ledger]]:
    """Opens a new ``Ledger`` on one database of each backend (each call: a new client, as another process would)."""
    backend = request.param
    options: dict[str, Any] = {}
    if backend == "sqlite":
        url = request.getfixturevalue("sqlite_url")
    elif backend == "postgres":
        url = request.getfixturevalue("postgres_ledger_url")
    else:
        url = request.getfixturevalue(f"{backend}_url")
        options["key_prefix"] = request.getfixturevalue("redis_key_prefix")
    opened: list[Ledger] = []

    def open_ledger() -> Ledger:
        ledger = Ledger.connect(url, **options)
        opened.append(ledger)
        return ledger

    yield open_ledger
    for ledger in opened:
        ledger.close()
    if "key_prefix" in options:
        purge(url, options["key_prefix"])


def test_pin_history_names_who_asked(memory_store: CompleteStore) -> None:
    ledger = Ledger(memory_store)
    conversation = ledger.conversation("s")
    task, answer = Message.user("the task"), Message.assistant("ok")
    conversation.append(task, answer)
    conversation.pin(task.message_id)
    result = handle_pin_message_tool(conversation, {"index": 1, "action": "pin"})
    assert result["status"] == "success"
    conversation.pin_index(0, False, source="host")
    events = ledger.pin_history("s")
    assert [(e.entry_id, e.pinned, e.source) for e in events] == [
        (task.message_id, True, "api"),
        (answer.message_id, True, "model"),
        (task.message_id, False, "host"),
    ]
    assert ledger.pin_history("s", "default") == events
    assert ledger.pin_history("s", "other") == []


def test_a_closed_ledger_refuses_every_call_and_loses_nothing(connect: Callable[[], Ledger]) -> None:
    ledger = connect()
    conversation = ledger.conversation("s")
    conversation.append(Message.user("kept"))
    ledger.close()
    calls: list[Callable[[], object]] = [
        lambda: ledger.conversation("s"),
        lambda: ledger.history("s"),
        lambda: ledger.sessions(),
        lambda: ledger.pin_history("s"),
        lambda: ledger.delete_session("s"),
        lambda: conversation.append(Message.user("after close")),
        lambda: conversation.pin_index(0),
    ]
    for call in calls:
        with pytest.raises(LedgerClosed, match="closed"):
            call()
    ledger.close()
    assert [h.message.plain_text for h in connect().history("s")] == ["kept"]


def _close_while_writing(ledger: Ledger, session_id: str, delay: float) -> tuple[list[str], list[BaseException]]:
    """Append in a thread until the ledger is closed under it; return what was acknowledged and raised."""
    conversation = ledger.conversation(session_id)
    acknowledged: list[str] = []
    errors: list[BaseException] = []
    started = threading.Event()

    def write() -> None:
        try:
            for i in range(10_000):
                conversation.append(Message.user(f"m{i}"))
                acknowledged.append(f"m{i}")
                started.set()
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)
            started.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert started.wait(timeout=60)
    time.sleep(delay)
    ledger.close()
    writer.join(timeout=60)
    assert not writer.is_alive()
    return acknowledged, errors


def test_a_close_racing_commits_lets_them_finish_or_refuses_them(connect: Callable[[], Ledger]) -> None:
    for round_ in range(3):
        acknowledged, errors = _close_while_writing(connect(), f"race-{round_}", 0.01 * round_)
        assert len(errors) == 1, errors
        assert isinstance(errors[0], LedgerClosed), errors
        stored = [h.message.plain_text for h in connect().history(f"race-{round_}")]
        assert stored == acknowledged  # every acknowledged commit, and no other


def test_a_session_deleted_by_another_process_is_not_recreated(connect: Callable[[], Ledger]) -> None:
    mine, theirs = connect(), connect()
    conversation = mine.conversation("s")
    task = Message.user("the task")
    conversation.append(task, Message.assistant("working on it"))
    conversation.pin(task.message_id)
    assert theirs.delete_session("s")
    with pytest.raises(SessionDeleted, match="deleted"):
        conversation.append(Message.user("more"))
    assert theirs.history("s") == []
    assert theirs.agents("s") == []
    assert theirs.pin_history("s") == []


def test_pins_a_strands_agent_makes_are_recorded_as_host_pins(memory_store: CompleteStore) -> None:
    from strands.agent.conversation_manager import NullConversationManager
    from strands.agent.conversation_manager.compression.pin_message import pin_message, unpin_message

    from contextledger.integrations.strands import LedgerSessionManager
    from contextledger.integrations.strands.scripted import Reply
    from tests.strands.scenarios import build_agent, play

    ledger = Ledger(memory_store)
    session_manager = LedgerSessionManager("s", ledger=ledger)
    agent = build_agent(session_manager, NullConversationManager())
    play(agent, [("q0", [Reply("a0")])])
    pin_message(agent.messages, 0)  # Strands' own pin helper: the host pins
    session_manager.sync_agent(agent)
    unpin_message(agent.messages, 0)
    session_manager.sync_agent(agent)
    events = ledger.pin_history("s")
    assert [(e.entry_id, e.pinned, e.source) for e in events] == [
        (agent.messages[0]["tracking_id"], True, "host"),
        (agent.messages[0]["tracking_id"], False, "host"),
    ]
