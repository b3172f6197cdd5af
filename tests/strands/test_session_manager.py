"""``LedgerSessionManager`` as a Strands user meets it: setup, errors, agents, state, threads."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest
from strands.agent.conversation_manager import NullConversationManager, SlidingWindowConversationManager
from strands.agent.conversation_manager.compression.pin_message import pin_message, unpin_message
from strands.hooks import BeforeToolCallEvent, HookRegistry
from strands.types.content import Message

from contextledger.errors import ConfigurationError, InvalidLedgerURL, InvalidMessage
from contextledger.integrations.strands import LedgerSessionManager
from contextledger.integrations.strands.scripted import CallTool, Reply, Step
from contextledger.ledger import DEFAULT_URL, Ledger
from contextledger.stores.capabilities import CompleteStore
from tests.strands.scenarios import build_agent, model_of, play


def test_default_is_the_embedded_sqlite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with LedgerSessionManager("s1") as session_manager:
        agent = build_agent(session_manager, NullConversationManager(), [Reply("hello")])
        agent("hi")
        ids = [m["tracking_id"] for m in agent.messages]
    assert (tmp_path / DEFAULT_URL.removeprefix("sqlite:///")).is_file()
    with Ledger.connect(DEFAULT_URL) as ledger:
        assert [h.message.message_id for h in ledger.history("s1")] == ids


def test_a_url_just_works(sqlite_url: str) -> None:
    agent = build_agent(LedgerSessionManager("s1", url=sqlite_url), NullConversationManager(), [Reply("hello")])
    agent("hi")
    with Ledger.connect(sqlite_url) as ledger:
        history = ledger.history("s1")
    assert [h.message.role for h in history] == ["user", "assistant"]
    assert [h.message.message_id for h in history] == [m["tracking_id"] for m in agent.messages]
    assert history[1].message.usage is not None


def test_bad_configuration_is_a_clear_typed_error(memory_ledger: Ledger, sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        LedgerSessionManager("s", ledger=memory_ledger, url=sqlite_url)
    with pytest.raises(ConfigurationError, match="session_id"):
        LedgerSessionManager("", ledger=memory_ledger)
    with pytest.raises(ConfigurationError, match="need url="):
        LedgerSessionManager("s", ledger=memory_ledger, auto_upgrade=True)
    with pytest.raises(InvalidLedgerURL):
        LedgerSessionManager("s", url="nosuchscheme://x")


def test_initial_messages_of_a_new_agent_are_stored(memory_ledger: Ledger) -> None:
    seed: list[Message] = [
        {"role": "user", "content": [{"text": "Earlier question"}]},
        {"role": "assistant", "content": [{"text": "Earlier answer"}]},
    ]
    agent = build_agent(LedgerSessionManager("s", ledger=memory_ledger), NullConversationManager())
    agent.messages.extend(seed)  # before any sync: stored at the next one
    model_of(agent).extend([Reply("now")])
    agent("Now?")
    texts = [h.message.plain_text for h in memory_ledger.history("s")]
    assert texts == ["Earlier question", "Earlier answer", "Now?", "now"]
    assert all(m.get("tracking_id") for m in agent.messages)


def test_one_agent_id_is_bound_once(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    first = build_agent(session_manager, NullConversationManager())
    with pytest.raises(ConfigurationError, match="already bound"):
        build_agent(session_manager, NullConversationManager())
    del first
    gc.collect()
    again = build_agent(session_manager, NullConversationManager(), [Reply("back")])
    again("still here?")
    assert memory_ledger.agents("s") == ["default"]


def test_agents_of_one_session_keep_their_own_conversation(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("team", ledger=memory_ledger)
    planner = build_agent(session_manager, SlidingWindowConversationManager(window_size=4), agent_id="planner")
    writer = build_agent(session_manager, NullConversationManager(), agent_id="writer")
    play(planner, [(f"plan {i}", [Reply(f"step {i}")]) for i in range(4)])
    play(writer, [("write", [CallTool("remember", {"fact": "draft"}, "tu-w"), Reply("written")])])
    assert memory_ledger.agents("team") == ["planner", "writer"]
    assert next(h.message.plain_text for h in memory_ledger.history("team", "writer")) == "write"
    assert {e.agent_id for e in memory_ledger.evictions("team")} == {"planner"}
    planner_before, writer_before = list(planner.messages), list(writer.messages)
    del planner, writer
    gc.collect()

    again = LedgerSessionManager("team", ledger=memory_ledger)
    planner = build_agent(again, SlidingWindowConversationManager(window_size=4), agent_id="planner")
    writer = build_agent(again, NullConversationManager(), agent_id="writer")
    assert planner.messages == planner_before
    assert writer.messages == writer_before


def test_agent_state_and_pins_survive_restore(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, NullConversationManager())
    play(agent, [(f"q{i}", [Reply(f"a{i}")]) for i in range(3)])
    agent.state.set("prefs", {"units": "metric"})
    pin_message(agent.messages, 1)
    pin_message(agent.messages, 2)
    unpin_message(agent.messages, 2)
    pin_message(agent.messages, 4)
    session_manager.sync_agent(agent)
    view = session_manager.conversation().view
    assert [e.pinned for e in view] == [False, True, False, False, True, False]
    before = list(agent.messages)
    del agent
    gc.collect()

    restored = build_agent(LedgerSessionManager("s", ledger=memory_ledger), NullConversationManager())
    assert restored.messages == before
    assert restored.state.get() == {"prefs": {"units": "metric"}}
    assert "metadata" not in restored.messages[2]  # unpinning left no trace, as in Strands


def test_a_redacted_message_keeps_its_original_in_the_ledger(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(
        session_manager, NullConversationManager(), [Reply("I can't help with that.", redact_user="[redacted]")]
    )
    agent("my card number is 4111 1111 1111 1111")
    assert agent.messages[0]["content"] == [{"text": "[redacted]"}]
    [revision] = memory_ledger.revisions("s")
    assert revision.reason == "redact"
    assert revision.original == [{"text": "my card number is 4111 1111 1111 1111"}]
    assert memory_ledger.history("s")[0].message.content == [{"text": "[redacted]"}]
    del agent
    gc.collect()
    restored = build_agent(LedgerSessionManager("s", ledger=memory_ledger), NullConversationManager())
    assert restored.messages[0]["content"] == [{"text": "[redacted]"}]


def test_an_invalid_message_is_refused_and_nothing_is_lost(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, NullConversationManager(), [Reply("fine")])
    agent("first")
    version = session_manager.conversation().version
    history = memory_ledger.history("s")
    agent.messages.append({"role": "robot", "content": [{"text": "beep"}]})  # type: ignore[typeddict-item]
    with pytest.raises(InvalidMessage, match="not a Strands message"):
        session_manager.sync_agent(agent)
    assert session_manager.conversation().version == version
    assert memory_ledger.history("s") == history
    agent.messages.pop()
    model_of(agent).extend([Reply("still fine")])
    agent("second")
    assert [h.message.plain_text for h in memory_ledger.history("s")] == ["first", "fine", "second", "still fine"]


def test_duplicate_tracking_ids_are_refused(memory_ledger: Ledger) -> None:
    session_manager = LedgerSessionManager("s", ledger=memory_ledger)
    agent = build_agent(session_manager, NullConversationManager(), [Reply("fine")])
    agent("first")
    agent.messages.append(dict(agent.messages[0]))  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="share tracking_id"):
        session_manager.sync_agent(agent)
    assert len(memory_ledger.history("s")) == 2


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_concurrent_agents_on_one_session_from_threads(backend: str, request: pytest.FixtureRequest) -> None:
    store: CompleteStore = request.getfixturevalue(f"{backend}_store")
    ledger = Ledger(store)
    session_manager = LedgerSessionManager("crowd", ledger=ledger)
    names = [f"agent-{i}" for i in range(4)]
    turns = 5
    agents = {
        name: build_agent(
            session_manager, SlidingWindowConversationManager(window_size=6, per_turn=True), agent_id=name
        )
        for name in names
    }
    errors: list[BaseException] = []
    start = threading.Barrier(len(names))

    def work(name: str) -> None:
        try:
            start.wait(timeout=30)
            run: list[tuple[str, list[Step]]] = [
                (f"{name} turn {t}", [CallTool("remember", {"fact": f"{name}-{t}"}, f"{name}-tu{t}"), Reply(f"ok {t}")])
                for t in range(turns)
            ]
            play(agents[name], run)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert ledger.agents("crowd") == names
    for name, agent in agents.items():
        conversation = session_manager.conversation(name)
        assert conversation.view.ids == [m["tracking_id"] for m in agent.messages]
        assert conversation.model_call_count == 2 * turns
        assert len(ledger.history("crowd", name)) == 4 * turns
        texts = [h.message.plain_text for h in ledger.history("crowd", name) if h.message.role == "user"]
        assert all(name in t for t in texts if "turn" in t)
    before = {name: list(agent.messages) for name, agent in agents.items()}
    agents.clear()
    gc.collect()
    again = LedgerSessionManager("crowd", ledger=ledger)
    for name in names:
        assert (
            build_agent(again, SlidingWindowConversationManager(window_size=6), agent_id=name).messages == before[name]
        )


class _Approval:
    """Asks a human before the ``remember`` tool runs (a Strands interrupt)."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self._check)

    def _check(self, event: BeforeToolCallEvent) -> None:
        if event.tool_use["name"] == "remember" and event.interrupt("approve", reason="store a fact?") != "yes":
            event.cancel_tool = "denied"


def test_a_conversation_paused_on_an_interrupt_is_resumed_not_repaired(memory_ledger: Ledger) -> None:
    agent = build_agent(
        LedgerSessionManager("s", ledger=memory_ledger),
        NullConversationManager(),
        [CallTool("remember", {"fact": "sky is blue"}, "tu-ask")],
        hooks=[_Approval()],
    )
    result = agent("Store that the sky is blue.")
    assert result.stop_reason == "interrupt"
    [interrupt] = result.interrupts or []
    del agent, result
    gc.collect()

    restored = build_agent(
        LedgerSessionManager("s", ledger=memory_ledger),
        NullConversationManager(),
        [Reply("Stored.")],
        hooks=[_Approval()],
    )
    assert "toolUse" in restored.messages[-1]["content"][0]  # the pending call is legitimate, not repaired
    restored([{"interruptResponse": {"interruptId": interrupt.id, "response": "yes"}}])  # type: ignore[arg-type]
    results = [b["toolResult"] for m in restored.messages for b in m["content"] if "toolResult" in b]
    assert results[0]["status"] == "success"
    assert results[0]["content"] == [{"text": "stored: sky is blue"}]
    assert restored.messages[-1]["content"] == [{"text": "Stored."}]
    assert not [r for r in memory_ledger.reductions("s") if r.trigger == "restore"]


def test_switching_the_strands_manager_between_runs_restores_the_view(memory_ledger: Ledger) -> None:
    agent = build_agent(
        LedgerSessionManager("s", ledger=memory_ledger), SlidingWindowConversationManager(window_size=4)
    )
    play(agent, [(f"q{i}", [Reply(f"a{i}")]) for i in range(4)])
    before = list(agent.messages)
    del agent
    gc.collect()
    restored = build_agent(LedgerSessionManager("s", ledger=memory_ledger), NullConversationManager())
    assert restored.messages == before
    model_of(restored).extend([Reply("go on")])
    restored("next")
    assert restored.messages[-1]["content"] == [{"text": "go on"}]


def test_restoring_a_conversation_left_mid_tool_writes_nothing_and_the_next_write_repairs(
    memory_ledger: Ledger,
) -> None:
    from contextledger import Message as LedgerMessage

    conversation = memory_ledger.conversation("s")
    conversation.append(LedgerMessage.user("Look alpha up."), LedgerMessage.tool_use("tu-lost", "look", {"k": "a"}))
    version = conversation.version
    agent = build_agent(LedgerSessionManager("s", ledger=memory_ledger), NullConversationManager(), [Reply("ok")])
    # Restored: the agent sees the call answered by an error result, the ledger is untouched.
    [result] = [b["toolResult"] for b in agent.messages[-1]["content"]]
    assert (result["toolUseId"], result["status"]) == ("tu-lost", "error")
    assert memory_ledger.conversation("s").version == version
    assert memory_ledger.reductions("s") == []
    spy: list[Any] = []
    commit = memory_ledger.store.commit

    def spying(changeset: Any) -> int:
        spy.append(changeset)
        return commit(changeset)

    memory_ledger.store.commit = spying  # type: ignore[method-assign]
    agent("Go on.")
    first = spy[0]
    # The repair rides with the first write: the error result and the prompt in one changeset.
    assert first.reduction is not None
    assert (first.reduction.trigger, first.reduction.strategy) == ("restore", "tool_pair_repair")
    assert [e.message.message_id for e in first.appends] == [tracking for tracking in _ids(agent)[2:4]]
    stored = memory_ledger.conversation("s")
    assert stored.view.ids == _ids(agent)
    assert stored.view.dangling_tool_uses() == []
    assert len(memory_ledger.reductions("s")) == 1


def _ids(agent: Any) -> list[str]:
    return [m["tracking_id"] for m in agent.messages]
