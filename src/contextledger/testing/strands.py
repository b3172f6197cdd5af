"""The Strands session contract, as tests: what ``LedgerSessionManager`` promises a Strands app.

Subclass :class:`StrandsSessionContract` in a test module where a ``store`` fixture yields
a fresh, empty :class:`~contextledger.stores.base.CompleteStore` (the store contract's
fixture); every test drives real Strands objects (``Agent``, ``Swarm``, its hooks and
conversation managers) with :class:`~contextledger.integrations.strands.ScriptedModel`,
offline. It mirrors Strands' own session-manager tests where the contract is the same
(restore, one conversation per ``agent_id``, a duplicate ``agent_id`` raises
``SessionException``, ``append_message`` persists what it is given, Swarm state) and
adds what the ledger promises besides: ``view_at(model_call=N)`` and
``fork(at_call=N)`` are exactly the input of call ``N`` under every conversation
manager (Strands' own, none, and contextledger's through the adapter), pins and tool
pairs survive, and agents on several threads share one session manager.

Needs ``strands-agents`` and pytest (``pip install 'contextledger[strands,testing]'``).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from strands import Agent, tool
from strands.agent.conversation_manager import (
    ConversationManager,
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.hooks import BeforeModelCallEvent
from strands.multiagent import GraphBuilder, Swarm
from strands.types.exceptions import SessionException

from contextledger.errors import ConfigurationError
from contextledger.integrations.strands import (
    CallTool,
    DuplicateAgentId,
    LedgerSessionManager,
    Overflow,
    Reply,
    ScriptedModel,
    StrandsConversationManager,
    pin_message_tool,
)
from contextledger.integrations.strands.multiagent import multi_agent_id
from contextledger.integrations.strands.scripted import Step
from contextledger.ledger import Ledger
from contextledger.managers import (
    SlidingWindowConversationManager as LedgerSlidingWindow,
)
from contextledger.managers import (
    SummarizingConversationManager as LedgerSummarizing,
)
from contextledger.managers import (
    TurnWindowConversationManager as LedgerTurnWindow,
)
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from contextledger.testing.hosts import strands_input

__all__ = ["MANAGERS", "SCRIPT", "StrandsSessionContract", "assert_inputs_exact", "build_agent", "model_inputs"]

CONTEXT_WINDOW = 4000
BIG = 3500  # reported input tokens that put the next call over a 0.7 proactive threshold


@tool
def lookup(key: str) -> str:
    """Look a key up and return its (long) entry."""
    return f"entry {key}: " + " ".join(f"{key}-{i}" for i in range(120))


@tool
def remember(fact: str) -> str:
    """Store a fact."""
    return f"stored: {fact}"


MANAGERS: dict[str, Callable[[], ConversationManager]] = {
    "strands-default": SlidingWindowConversationManager,
    "strands-sliding": lambda: SlidingWindowConversationManager(
        window_size=6, per_turn=2, pin_first=1, proactive_compression={"compression_threshold": 0.7}
    ),
    "strands-summarizing": lambda: SummarizingConversationManager(
        summary_ratio=0.5, preserve_recent_messages=2, proactive_compression={"compression_threshold": 0.7}
    ),
    "strands-null": NullConversationManager,
    "ledger-sliding": lambda: StrandsConversationManager(
        LedgerSlidingWindow(window_size=6, per_turn=True, protected_messages={"first": 1})
    ),
    "ledger-summarizing": lambda: StrandsConversationManager(
        LedgerSummarizing(summary_ratio=0.5, preserve_recent_messages=2, proactive_compression=True)
    ),
    "ledger-turns": lambda: StrandsConversationManager(LedgerTurnWindow(max_user_turns=2)),
}
"""Every kind of conversation manager a Strands agent runs: Strands' own, none, contextledger's."""

SCRIPT: list[tuple[str, list[Step]]] = [
    ("My name is Ada. Remember it.", [Reply("Noted, Ada.")]),
    ("Look up alpha.", [CallTool("lookup", {"key": "alpha"}, "tu-alpha"), Reply("alpha found")]),
    ("Compare it.", [Overflow(), Reply("compared")]),
    ("Pin my name.", [CallTool("pin_message", {"index": 0}, "tu-pin"), Reply("Pinned.")]),
    ("Look up beta.", [CallTool("lookup", {"key": "beta"}, "tu-beta"), Reply("beta found", input_tokens=BIG)]),
    ("Store a fact.", [CallTool("remember", {"fact": "sky is blue"}, "tu-fact"), Reply("stored")]),
    ("Thanks!", [Reply("You're welcome.")]),
]
"""Turns with tools, a pin, a proactive threshold reached and a context overflow."""


def script_for(manager: str) -> list[tuple[str, list[Step]]]:
    """:data:`SCRIPT` without overflows for the null manager (Strands re-raises them there)."""
    if manager != "strands-null":
        return SCRIPT
    return [(prompt, [s for s in steps if not isinstance(s, Overflow)]) for prompt, steps in SCRIPT]


def build_agent(
    session_manager: LedgerSessionManager | None,
    manager: ConversationManager | None = None,
    script: Sequence[Step] = (),
    *,
    agent_id: str | None = None,
) -> Agent:
    """A Strands agent on a scripted model, with the contract's tools and the pin tool."""
    options: dict[str, Any] = {} if manager is None else {"conversation_manager": manager}
    return Agent(
        model=ScriptedModel(script, context_window_limit=CONTEXT_WINDOW),
        tools=[lookup, remember, pin_message_tool],
        callback_handler=None,
        session_manager=session_manager,
        agent_id=agent_id,
        **options,
    )


def play(agent: Agent, script: Sequence[tuple[str, Sequence[Step]]]) -> None:
    """Run each ``(prompt, steps)`` as one invocation; every scripted step must be used."""
    model = agent.model
    assert isinstance(model, ScriptedModel)
    for prompt, steps in script:
        model.extend(steps)
        agent(prompt)
        assert model.remaining == 0, f"{prompt!r} left {model.remaining} scripted steps"


def model_inputs(model: ScriptedModel) -> list[list[dict[str, Any]]]:
    """The input of every call the agent made (summarization requests left out), as the model got it."""
    return [strands_input(call.messages) for call in model.calls if not call.summarization]


def assert_inputs_exact(
    ledger: Ledger, session_id: str, agent_id: str, inputs: Sequence[list[dict[str, Any]]], *, fork: bool = False
) -> None:
    """``view_at(model_call=N)`` (and ``fork(at_call=N)``) equal ``inputs[N - 1]`` for every call."""
    assert ledger.conversation(session_id, agent_id).model_call_count == len(inputs)
    for number, received in enumerate(inputs, start=1):
        assert strands_input(ledger.view_at(session_id, agent_id, model_call=number)) == received, f"call {number}"
        if fork:
            forked = f"{session_id}-at-{number}"
            ledger.fork(session_id, forked, at_call=number, agent_id=agent_id)
            assert strands_input(ledger.conversation(forked, agent_id).view) == received, f"fork at {number}"


class StrandsSessionContract:
    """``LedgerSessionManager`` as Strands' session-manager contract states it, on a ``store`` fixture."""

    # -- what the model was given --------------------------------------------------------------

    @pytest.mark.parametrize("manager", sorted(MANAGERS))
    def test_view_at_every_call_is_what_the_model_was_given(self, store: CompleteStore, manager: str) -> None:
        """For every conversation manager, each call's input is rebuilt exactly from the ledger."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger), MANAGERS[manager]())
        play(agent, script_for(manager))
        assert isinstance(agent.model, ScriptedModel)
        assert_inputs_exact(ledger, "s", "default", model_inputs(agent.model))

    def test_the_adapter_alone_keeps_time_travel_exact(self, store: CompleteStore) -> None:
        """A contextledger manager as the agent's conversation manager, no session manager: still exact."""
        ledger = Ledger(store)
        adapter = StrandsConversationManager(
            LedgerSlidingWindow(window_size=6, per_turn=True), ledger=ledger, session_id="solo"
        )
        agent = build_agent(None, adapter)
        play(agent, [(prompt, steps) for prompt, steps in SCRIPT if prompt != "Pin my name."])
        assert isinstance(agent.model, ScriptedModel)
        assert_inputs_exact(ledger, "solo", "default", model_inputs(agent.model))

    def test_the_first_call_saw_the_prompt_only(self, store: CompleteStore) -> None:
        """A default agent, two turns: call 1 was the first prompt alone, in view_at and in a fork."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger), script=["first answer", "second answer"])
        agent("q1")
        agent("q2")
        first = ledger.view_at("s", model_call=1)
        assert [e.message.plain_text for e in first] == ["q1"]
        assert isinstance(agent.model, ScriptedModel)
        assert_inputs_exact(ledger, "s", "default", model_inputs(agent.model), fork=True)

    def test_edits_in_place_reach_view_at_as_the_model_got_them(self, store: CompleteStore) -> None:
        """A hook redacting a message's text in place before a call, and the app editing one between calls."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger), script=["one", "two", "three"])

        def redact(event: BeforeModelCallEvent) -> None:
            for message in event.agent.messages:
                for block in message["content"]:
                    if "secret" in block.get("text", ""):
                        block["text"] = block["text"].replace("secret", "[redacted]")  # in place

        agent("my code is 42")
        agent.messages[0]["content"][0]["text"] = "my secret code is 43"  # between calls, in place
        agent("second")
        agent.hooks.add_callback(BeforeModelCallEvent, redact)
        agent("third")
        assert isinstance(agent.model, ScriptedModel)
        inputs = model_inputs(agent.model)
        assert inputs[1][0]["content"] == [{"text": "my secret code is 43"}]
        assert inputs[2][0]["content"] == [{"text": "my [redacted] code is 43"}]
        assert_inputs_exact(ledger, "s", "default", inputs)
        originals = [revision.original for revision in ledger.revisions("s")]  # the ledger keeps each text
        assert originals == [[{"text": "my code is 42"}], [{"text": "my secret code is 43"}]]

    def test_a_restored_agent_continues_exactly(self, store: CompleteStore) -> None:
        """A new agent on the session gets the live view, state and count, and time travel stays exact."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger), MANAGERS["strands-sliding"]())
        agent.state.set("prefs", {"units": "metric"})
        play(agent, SCRIPT[:4])
        assert isinstance(agent.model, ScriptedModel)
        before, inputs = [dict(m) for m in agent.messages], model_inputs(agent.model)
        cm_state = agent.conversation_manager.get_state()
        del agent
        gc.collect()
        again = build_agent(LedgerSessionManager("s", ledger=ledger), MANAGERS["strands-sliding"]())
        assert [dict(m) for m in again.messages] == before
        assert again.state.get() == {"prefs": {"units": "metric"}}
        assert again.conversation_manager.get_state() == cm_state
        play(again, SCRIPT[4:])
        assert isinstance(again.model, ScriptedModel)
        assert_inputs_exact(ledger, "s", "default", [*inputs, *model_inputs(again.model)])

    def test_time_travel_survives_export_import_and_copy(self, store: CompleteStore) -> None:
        """The call stamps move with the records: an imported or copied session rebuilds every call the same."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger), MANAGERS["strands-summarizing"]())
        play(agent, SCRIPT)
        assert isinstance(agent.model, ScriptedModel)
        inputs = model_inputs(agent.model)
        (records,) = ledger.export_records("s")
        imported = Ledger(MemoryStore())
        imported.import_records(records)
        assert_inputs_exact(imported, "s", "default", inputs)
        copied = Ledger(MemoryStore())
        ledger.copy_to(copied, ["s"])
        assert_inputs_exact(copied, "s", "default", inputs)
        assert ledger.import_records(copied.export_records("s")[0]) == "unchanged"  # the same records, stamps and all

    # -- the session-manager contract ----------------------------------------------------------

    def test_each_agent_id_keeps_its_own_conversation(self, store: CompleteStore) -> None:
        """Agents of one session, each under its own agent_id, restore separately."""
        ledger = Ledger(store)
        session_manager = LedgerSessionManager("team", ledger=ledger)
        planner = build_agent(session_manager, agent_id="planner", script=["plan made"])
        writer = build_agent(session_manager, agent_id="writer", script=["text written"])
        planner("Plan it.")
        writer("Write it.")
        assert ledger.agents("team") == ["planner", "writer"]
        saved = {a.agent_id: [dict(m) for m in a.messages] for a in (planner, writer)}
        del planner, writer
        gc.collect()
        restored = LedgerSessionManager("team", ledger=ledger)
        for agent_id, messages in saved.items():
            assert [dict(m) for m in build_agent(restored, agent_id=agent_id).messages] == messages

    def test_a_duplicate_agent_id_is_a_session_exception(self, store: CompleteStore) -> None:
        """Strands' own managers raise SessionException; the ledger's error is that and a ConfigurationError."""
        session_manager = LedgerSessionManager("s", ledger=Ledger(store))
        first = build_agent(session_manager, agent_id="same")
        for kind in (SessionException, ConfigurationError, DuplicateAgentId):
            with pytest.raises(kind, match="must be unique in a session"):
                build_agent(session_manager, agent_id="same")
        assert first.agent_id == "same"

    def test_tracking_ids_are_the_ledger_ids(self, store: CompleteStore) -> None:
        """Each message keeps its Strands tracking_id as its ledger id, in order."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger))
        play(agent, SCRIPT[:2])
        ids = [m["tracking_id"] for m in agent.messages]
        assert len(set(ids)) == len(ids)
        assert [h.message.message_id for h in ledger.history("s")] == ids

    def test_append_message_called_directly_records_the_message(self, store: CompleteStore) -> None:
        """A message handed to append_message is recorded, and the live agent shows it as a restore would."""
        ledger = Ledger(store)
        session_manager = LedgerSessionManager("s", ledger=ledger)
        agent = build_agent(session_manager, script=["hello"])
        agent("hi")
        note: Any = {"role": "user", "content": [{"text": "A note from the app."}]}
        session_manager.append_message(note, agent)
        assert [h.message.plain_text for h in ledger.history("s")][-1] == "A note from the app."
        assert agent.messages[-1] is note
        assert [e.entry_id for e in ledger.conversation("s").view] == [m["tracking_id"] for m in agent.messages]
        session_manager.append_message(note, agent)  # the same message again: nothing new
        assert len(ledger.history("s")) == 3

    def test_sync_agent_called_directly_records_what_changed(self, store: CompleteStore) -> None:
        """Edits made to agent.messages outside a turn are committed by sync_agent."""
        ledger = Ledger(store)
        session_manager = LedgerSessionManager("s", ledger=ledger)
        agent = build_agent(session_manager)
        play(agent, SCRIPT[:2])
        gone = agent.messages.pop(0)
        session_manager.sync_agent(agent)
        view = ledger.conversation("s").view
        assert gone["tracking_id"] not in view.ids
        assert [e.entry_id for e in ledger.evictions("s")] == [gone["tracking_id"]]

    def test_a_redaction_keeps_the_original_the_model_saw(self, store: CompleteStore) -> None:
        """A guardrail redaction is a revision: the view shows it, view_at shows what the model got."""
        ledger = Ledger(store)
        agent = build_agent(LedgerSessionManager("s", ledger=ledger), script=[Reply("no", redact_user="[redacted]")])
        agent("my card is 4111")
        assert agent.messages[0]["content"] == [{"text": "[redacted]"}]
        assert next(e.message.plain_text for e in ledger.conversation("s").view) == "[redacted]"
        assert [e.message.plain_text for e in ledger.view_at("s", model_call=1)] == ["my card is 4111"]

    def test_a_swarm_commits_its_state_and_a_duplicate_id_is_refused(self, store: CompleteStore) -> None:
        """A Swarm's state is committed under its reserved id; a second live Swarm with that id is refused."""
        ledger = Ledger(store)
        session_manager = LedgerSessionManager("s", ledger=ledger)
        researcher = Agent(
            name="researcher",
            agent_id="researcher",
            callback_handler=None,
            model=ScriptedModel(
                [CallTool("handoff_to_agent", {"agent_name": "writer", "message": "go"}, "h1"), Reply("sent")]
            ),
        )
        writer = Agent(name="writer", agent_id="writer", callback_handler=None, model=ScriptedModel(["written"]))
        swarm = Swarm([researcher, writer], session_manager=session_manager, id="team")
        result = swarm("Write a report")
        assert [n.node_id for n in result.node_history] == ["researcher", "writer"]
        stored = ledger.conversation("s", multi_agent_id("team")).agent_state
        assert stored["node_history"] == ["researcher", "writer"]
        with pytest.raises(SessionException):
            Swarm(
                [Agent(name="a", agent_id="a", callback_handler=None, model=ScriptedModel())],
                session_manager=session_manager,
                id="team",
            )

    def test_a_graph_commits_its_state_after_every_node(self, store: CompleteStore) -> None:
        """A Graph's state is committed under its reserved id, node by node, in order."""
        ledger = Ledger(store)
        builder = GraphBuilder()
        for name in ("plan", "draft"):
            node = Agent(name=name, agent_id=name, callback_handler=None, model=ScriptedModel([f"the {name}"]))
            builder.add_node(node, name)
        builder.add_edge("plan", "draft")
        builder.set_entry_point("plan")
        builder.set_graph_id("pipeline")
        builder.set_session_manager(LedgerSessionManager("s", ledger=ledger))
        result = builder.build()("Write it.")
        assert [n.node_id for n in result.execution_order] == ["plan", "draft"]
        conversation = ledger.conversation("s", multi_agent_id("pipeline"))
        assert conversation.agent_state["status"] == "completed"
        assert conversation.version >= 2  # one commit per node at least, then the end of the run

    # -- threads ---------------------------------------------------------------------------------

    def test_agents_on_several_threads_share_one_session_manager(self, store: CompleteStore) -> None:
        """Agents running at once on their own threads lose nothing and each stays exact."""
        ledger = Ledger(store)
        session_manager = LedgerSessionManager("crowd", ledger=ledger)
        agents = [build_agent(session_manager, MANAGERS["strands-sliding"](), agent_id=f"a{n}") for n in range(4)]
        errors: list[BaseException] = []
        start = threading.Barrier(len(agents))

        def work(agent: Agent) -> None:
            try:
                start.wait(timeout=30)
                play(agent, SCRIPT[:3])
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(a,), daemon=True) for a in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "an agent thread hung"
        assert errors == []
        for agent in agents:
            assert isinstance(agent.model, ScriptedModel)
            view = ledger.conversation("crowd", agent.agent_id).view
            assert view.ids == [m["tracking_id"] for m in agent.messages]
            assert_inputs_exact(ledger, "crowd", agent.agent_id, model_inputs(agent.model))
