"""One test per access to Strands internals (``integrations/strands/_compat.py``).

When one of these fails, the installed Strands changed something the integration relies
on: update ``_compat.py`` (and the supported range in ``pyproject.toml`` and ``docs/hosts/strands.md``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from strands import Agent
from strands.agent.conversation_manager import (
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.session.file_session_manager import FileSessionManager
from strands.types.session import SessionAgent

from contextledger.integrations.strands import LedgerSessionManager, Reply, ScriptedModel, _compat

ROOT = Path(__file__).resolve().parents[2]


def _agent(**kwargs: object) -> Agent:
    return Agent(model=ScriptedModel([Reply("ok")]), callback_handler=None, **kwargs)  # type: ignore[arg-type]


def test_the_installed_strands_is_a_supported_one() -> None:
    installed = _compat.strands_version()
    major, minor = (int(part) for part in installed.split(".")[:2])
    assert (major, minor) >= (1, 62), f"strands-agents {installed} is older than {_compat.SUPPORTED_STRANDS}"
    assert major < 2, f"strands-agents {installed} is outside {_compat.SUPPORTED_STRANDS}; check _compat.py"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'strands = ["strands-agents{_compat.SUPPORTED_STRANDS}"]' in pyproject
    assert f"strands-agents{_compat.SUPPORTED_STRANDS}" in (ROOT / "docs" / "hosts" / "strands.md").read_text()


def test_internal_state_is_what_session_agent_stores() -> None:
    agent = _agent()
    state = _compat.internal_state(agent)
    assert set(state) == {"interrupt_state", "model_state"}, (
        f"SessionAgent.from_agent(agent)._internal_state changed shape: {sorted(state)}"
    )
    assert state["interrupt_state"]["activated"] is False
    json.dumps(state)  # stored as JSON


def test_agent_states_are_the_agents_own_and_copies() -> None:
    agent = _agent()
    agent.state.set("task", {"step": 1})
    state, manager_state, internal = _compat.agent_states(agent)
    assert state == agent.state.get() == {"task": {"step": 1}}
    assert manager_state == agent.conversation_manager.get_state(), "from_agent no longer takes get_state()"
    assert internal == _compat.internal_state(agent)
    state["task"]["step"] = 2  # a copy: the agent's state is not changed through it
    assert agent.state.get() == {"task": {"step": 1}}, "SessionAgent.from_agent no longer copies the agent's state"


def test_restore_internal_state_round_trips_through_session_agent() -> None:
    agent = _agent()
    state = _compat.internal_state(agent)
    state["interrupt_state"] = {**state["interrupt_state"], "activated": True, "context": {"k": "v"}}
    state["model_state"] = {"previous_response_id": "r-1"}
    other = _agent()
    _compat.restore_internal_state(other, state)
    assert _compat.internal_state(other) == state, "SessionAgent.initialize_internal_state no longer restores it"


def test_interrupt_activated_reads_the_stored_interrupt_flag() -> None:
    stored = _compat.internal_state(_agent())
    assert _compat.interrupt_activated(stored) is False
    stored["interrupt_state"]["activated"] = True
    assert _compat.interrupt_activated(stored) is True
    assert _compat.interrupt_activated(None) is False


def test_compression_threshold_is_the_resolved_proactive_threshold() -> None:
    assert _compat.compression_threshold(SlidingWindowConversationManager()) is None
    manager = SlidingWindowConversationManager(proactive_compression={"compression_threshold": 0.6})
    assert _compat.compression_threshold(manager) == 0.6, (
        "ConversationManager._compression_threshold moved; the proactive/per_turn attribution needs it"
    )
    assert _compat.compression_threshold(SummarizingConversationManager(proactive_compression=True)) is not None


def test_session_manager_of_is_the_agents_session_manager(tmp_path: Path) -> None:
    session_manager = LedgerSessionManager("s", url=f"sqlite:///{tmp_path / 'l.db'}")
    agent = _agent(session_manager=session_manager)
    assert _compat.session_manager_of(agent) is session_manager, "Agent._session_manager moved"
    assert _compat.session_manager_of(_agent()) is None


def test_stored_internal_state_is_read_from_a_file_session(tmp_path: Path) -> None:
    agent = _agent(session_manager=FileSessionManager("s", storage_dir=str(tmp_path)))
    agent("hi")
    record = json.loads((tmp_path / "session_s/agents/agent_default/agent.json").read_text())
    assert "_internal_state" in record, "FileSessionManager no longer writes _internal_state"
    assert _compat.stored_internal_state(SessionAgent.from_dict(record)) == _compat.internal_state(agent)


def test_removed_message_count_and_summary_message_keys_of_manager_state() -> None:
    sliding = SlidingWindowConversationManager(window_size=2)
    agent = _agent(conversation_manager=sliding)
    agent.model.extend([Reply("two"), Reply("three")])  # type: ignore[attr-defined]
    for prompt in ("one", "two", "three"):
        agent(prompt)
    state = sliding.get_state()
    assert _compat.removed_message_count(state) == sliding.removed_message_count > 0, (
        "get_state() no longer carries removed_message_count"
    )
    summarizing = SummarizingConversationManager()
    summarizing._summary_message = {"role": "user", "content": [{"text": "s"}]}  # what a summary sets
    assert _compat.summary_message(summarizing.get_state()) == {"role": "user", "content": [{"text": "s"}]}, (
        "get_state() no longer carries summary_message"
    )
    assert state["__name__"] == "SlidingWindowConversationManager", "the state no longer names its manager"


def test_file_session_layout_is_what_the_import_reads(tmp_path: Path) -> None:
    agent = _agent(session_manager=FileSessionManager("s", storage_dir=str(tmp_path)), agent_id="a")
    agent("hi")
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json"))
    assert files == [
        "session_s/agents/agent_a/agent.json",
        "session_s/agents/agent_a/messages/message_0.json",
        "session_s/agents/agent_a/messages/message_1.json",
        "session_s/session.json",
    ]
    assert re.fullmatch(r"session_s/agents/agent_a/messages/message_\d+\.json", files[1])
