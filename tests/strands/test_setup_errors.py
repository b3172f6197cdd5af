"""The easy mistake: a contextledger manager handed to Strands directly fails at set-up, naming the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from strands import Agent

from contextledger.errors import ConfigurationError
from contextledger.integrations.strands import LedgerSessionManager, Reply, ScriptedModel, StrandsConversationManager
from contextledger.managers import (
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)

MANAGERS: dict[str, Callable[[], Any]] = {
    "sliding": lambda: SlidingWindowConversationManager(window_size=4),
    "summarizing": lambda: SummarizingConversationManager(),
    "turn_window": lambda: TurnWindowConversationManager(max_user_turns=2),
    "null": lambda: NullConversationManager(),
}


@pytest.mark.parametrize("kind", sorted(MANAGERS))
@pytest.mark.parametrize("with_session", [False, True])
def test_a_contextledger_manager_as_conversation_manager_is_refused_at_set_up(
    kind: str, with_session: bool, tmp_path: Path
) -> None:
    manager = MANAGERS[kind]()
    session = LedgerSessionManager("s", url=f"sqlite:///{tmp_path / 'l.db'}") if with_session else None
    with pytest.raises(ConfigurationError, match=r"StrandsConversationManager\(") as raised:
        Agent(model=ScriptedModel([Reply("never")]), conversation_manager=manager, session_manager=session)
    assert type(manager).__name__ in str(raised.value)
    # the fix the message names works
    agent = Agent(
        model=ScriptedModel([Reply("fine")]),
        conversation_manager=StrandsConversationManager(MANAGERS[kind]()),
        session_manager=session,
        callback_handler=None,
    )
    assert str(agent("hi")).strip() == "fine"
