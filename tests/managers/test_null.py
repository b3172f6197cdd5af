from __future__ import annotations

import pytest

from contextledger import Conversation, HookRegistry, NullConversationManager
from contextledger.core.hooks import AfterInvocationEvent, AfterModelCallEvent, BeforeModelCallEvent, MessageAddedEvent
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.managers.base import ConversationManager, ReductionRequest
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import chat, overflow


def test_null_manager_registers_no_hooks() -> None:
    registry = HookRegistry()
    registry.add_hook(NullConversationManager())
    for event_type in (BeforeModelCallEvent, AfterModelCallEvent, AfterInvocationEvent, MessageAddedEvent):
        assert not registry.has_callbacks(event_type)


@pytest.mark.parametrize("manager", [NullConversationManager(), None], ids=["null", "no-manager"])
def test_an_overflow_is_re_raised_unchanged(
    memory_store: CompleteStore, manager: NullConversationManager | None
) -> None:
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(6))
    error = overflow()
    conv.before_model_call()
    with pytest.raises(type(error)) as info:
        conv.after_model_call(error)
    assert info.value is error
    assert len(conv.view) == 6
    assert memory_store.reductions("s", "default") == []
    conv.after_invocation()
    assert conv.reduce("manual") is None
    assert len(conv.view) == 6


def test_null_manager_is_a_conversation_manager() -> None:
    manager = NullConversationManager()
    assert isinstance(manager, ConversationManager)
    assert manager.export_state() is None
    manager.restore_state(None)
    manager.restore_state({"manager": "sliding_window", "reductions": 3})
    with pytest.raises(ConfigurationError):
        manager.restore_state("garbage")  # type: ignore[arg-type]
    assert manager.plan(View(()), ReductionRequest(trigger="reactive")) is None
