"""Commits per Strands turn: the prompt, then the answer with everything else -- and what a crash then loses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from strands import Agent, tool
from strands.agent.conversation_manager import SlidingWindowConversationManager

from contextledger.core.changeset import Changeset
from contextledger.integrations.strands import CallTool, LedgerSessionManager, Reply, ScriptedModel
from contextledger.ledger import Ledger
from tests.strands.conftest import run_child


class CommitSpy:
    def __init__(self, ledger: Ledger) -> None:
        self.changesets: list[Changeset] = []
        commit = ledger.store.commit

        def spy(changeset: Changeset) -> int:
            self.changesets.append(changeset)
            return commit(changeset)

        ledger.store.commit = spy  # type: ignore[method-assign]

    def take(self) -> list[Changeset]:
        taken, self.changesets = self.changesets, []
        return taken


def _texts(changeset: Changeset) -> list[str]:
    return [e.message.plain_text for e in changeset.appends]


def test_a_plain_turn_is_two_commits_also_when_the_window_slides(memory_ledger: Ledger) -> None:
    spy = CommitSpy(memory_ledger)
    agent = Agent(
        model=ScriptedModel(),
        callback_handler=None,
        session_manager=LedgerSessionManager("s", ledger=memory_ledger),
        conversation_manager=SlidingWindowConversationManager(window_size=4),
    )
    spy.take()  # the agent's creation
    for turn in range(6):
        agent.model.extend([f"answer {turn}"])  # type: ignore[attr-defined]
        agent(f"question {turn}")
        prompt, answer = spy.take()
        # the prompt is committed before the model is called ...
        assert _texts(prompt) == [f"question {turn}"]
        assert prompt.model_call_count is None
        assert prompt.reduction is None
        # ... the answer with the model-call count, the Strands state and the end-of-invocation eviction
        assert _texts(answer) == [f"answer {turn}"]
        assert answer.model_call_count == turn + 1
        assert answer.manager_state is not None
        assert answer.manager_state["conversation_manager"] == agent.conversation_manager.get_state()
        if turn >= 2:  # from the third turn on, the window of 4 evicts the oldest turn
            assert answer.reduction is not None
            assert answer.reduction.trigger == "end_of_invocation"
            assert len(answer.evict) == 2
        else:
            assert answer.reduction is None
    conversation = memory_ledger.conversation("s")
    assert conversation.model_call_count == 6
    assert [e.message.plain_text for e in conversation.view] == [m["content"][0]["text"] for m in agent.messages]


def test_a_tool_use_is_committed_before_its_tool_runs(memory_ledger: Ledger) -> None:
    seen: list[list[str]] = []

    @tool
    def look(key: str) -> str:
        """Look a key up (and note what the ledger already holds)."""
        seen.append([h.message.role for h in memory_ledger.history("s")])
        return f"value of {key}"

    spy = CommitSpy(memory_ledger)
    agent = Agent(
        model=ScriptedModel([CallTool("look", {"key": "k"}, "tu-1"), Reply("done")]),
        tools=[look],
        callback_handler=None,
        session_manager=LedgerSessionManager("s", ledger=memory_ledger),
    )
    spy.take()
    agent("look k up")
    commits = spy.take()
    # prompt; toolUse with the first call's count; toolResult; answer with the second call's count
    assert [len(c.appends) for c in commits] == [1, 1, 1, 1]
    assert [c.model_call_count for c in commits] == [None, 1, None, 2]
    assert seen == [["user", "assistant"]]  # the toolUse was in the ledger while the tool ran


def test_a_crash_during_the_model_call_keeps_the_prompt_and_loses_only_that_call(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    child: Any = run_child(
        "crash-in-model",
        "--backend",
        "ledger",
        "--target",
        url,
        "--session",
        "c",
        out=tmp_path / "out.json",
        expect_exit=17,
    )
    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation("c")
        texts = [e.message.plain_text for e in conversation.view]
        assert texts == [*child["committed"], "the question it died on"]
        assert conversation.model_call_count == 2  # the two answered calls; the fatal one was never counted


def test_with_the_adapter_a_plain_turn_is_two_commits_too(memory_ledger: Ledger) -> None:
    from contextledger import SlidingWindowConversationManager as LedgerSlidingWindow
    from contextledger.integrations.strands import StrandsConversationManager

    spy = CommitSpy(memory_ledger)
    agent = Agent(
        model=ScriptedModel(),
        callback_handler=None,
        session_manager=LedgerSessionManager("s", ledger=memory_ledger),
        conversation_manager=StrandsConversationManager(LedgerSlidingWindow(window_size=4)),
    )
    spy.take()
    for turn in range(5):
        agent.model.extend([f"answer {turn}"])  # type: ignore[attr-defined]
        agent(f"question {turn}")
        prompt, answer = spy.take()
        assert _texts(prompt) == [f"question {turn}"]
        assert prompt.model_call_count is None
        # the answer carries the model-call count and the end-of-invocation reduction
        assert _texts(answer) == [f"answer {turn}"]
        assert answer.model_call_count == turn + 1
        if turn >= 2:
            assert answer.reduction is not None
            assert answer.reduction.trigger == "end_of_invocation"
            assert len(answer.evict) == 2
        else:
            assert answer.reduction is None
    conversation = memory_ledger.conversation("s")
    assert conversation.model_call_count == 5
    assert [e.message.plain_text for e in conversation.view] == [m["content"][0]["text"] for m in agent.messages]
    assert len(agent.messages) == 4
