from __future__ import annotations

import pytest

from contextledger import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    Conversation,
    HookEvent,
    HookProvider,
    HookRegistry,
    Message,
    MessageAddedEvent,
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)
from contextledger.errors import ConfigurationError, ContextWindowOverflowError
from contextledger.stores.capabilities import CompleteStore

EVENT_TYPES = (BeforeModelCallEvent, AfterModelCallEvent, AfterInvocationEvent, MessageAddedEvent)


@pytest.fixture
def conv(memory_store: CompleteStore) -> Conversation:
    return Conversation(memory_store, "s")


def test_retry_model_call_is_only_valid_with_an_error(conv: Conversation) -> None:
    event = AfterModelCallEvent(conv.context())
    with pytest.raises(ValueError, match="only valid when the model call failed"):
        event.retry_model_call = True
    assert event.retry_model_call is False
    event.retry_model_call = False
    failed = AfterModelCallEvent(conv.context(error=ContextWindowOverflowError("too long")))
    failed.retry_model_call = True
    assert failed.retry_model_call is True


def test_hook_provider_is_runtime_checkable() -> None:
    class Provider:
        def register_hooks(self, registry: HookRegistry) -> None:
            registry.add_callback(AfterInvocationEvent, lambda event: None)

    assert isinstance(Provider(), HookProvider)
    assert not isinstance(object(), HookProvider)
    for manager in (
        NullConversationManager(),
        SlidingWindowConversationManager(),
        SummarizingConversationManager(),
        TurnWindowConversationManager(max_user_turns=2),
    ):
        assert isinstance(manager, HookProvider)
    with pytest.raises(TypeError, match="not a HookProvider"):
        HookRegistry().add_hook(object())  # type: ignore[arg-type]


def test_null_manager_registers_nothing_and_policies_register_their_events() -> None:
    empty = HookRegistry()
    empty.add_hook(NullConversationManager())
    assert not any(empty.has_callbacks(t) for t in EVENT_TYPES)
    registry = HookRegistry()
    registry.add_hook(SlidingWindowConversationManager())
    assert [registry.has_callbacks(t) for t in EVENT_TYPES] == [True, True, True, False]


def test_callbacks_run_in_registration_order_and_match_subclasses(conv: Conversation) -> None:
    seen: list[str] = []
    registry = HookRegistry()
    registry.add_callback(HookEvent, lambda e: seen.append(f"any:{type(e).__name__}"))
    registry.add_callback(AfterInvocationEvent, lambda e: seen.append("first"))
    registry.add_callback(AfterInvocationEvent, lambda e: seen.append("second"))
    event = AfterInvocationEvent(conv.context())
    assert registry.invoke(event) is event
    assert seen == ["any:AfterInvocationEvent", "first", "second"]
    assert registry.has_callbacks(BeforeModelCallEvent)  # through HookEvent


def test_a_callback_added_after_an_append_is_called_by_the_next(conv: Conversation) -> None:
    """has_callbacks' answer (remembered per event type) follows every later subscription."""
    conv.append(Message.user("before any callback"))
    assert not conv.hooks.has_callbacks(MessageAddedEvent)
    added: list[str] = []
    conv.hooks.add_callback(MessageAddedEvent, lambda e: added.append(e.message.message_id))
    message = Message.user("after")
    conv.append(message)
    assert conv.hooks.has_callbacks(MessageAddedEvent)
    assert added == [message.message_id]


def test_a_subscription_while_an_answer_is_worked_out_is_not_missed() -> None:
    """An answer worked out while another callback is subscribed is not remembered past that subscription.

    The subscribed type's subclass check subscribes a second callback (as another thread
    might, between the registry's read of its callbacks and its answer) and from then on
    counts the asked type as its subclass: the answer worked out is False, the true one
    after the subscription True.
    """
    registry = HookRegistry()
    state = {"subscribed": False}

    class Checking(type):
        def __subclasscheck__(cls, subclass: type) -> bool:
            if not state["subscribed"]:
                state["subscribed"] = True
                registry.add_callback(Watched, lambda e: None)
                return False
            return subclass is AfterModelCallEvent or type.__subclasscheck__(cls, subclass)

    class Watched(HookEvent, metaclass=Checking):
        pass

    registry.add_callback(Watched, lambda e: None)
    assert not registry.has_callbacks(AfterModelCallEvent)  # worked out before the second subscription
    assert registry.has_callbacks(AfterModelCallEvent)  # asked again after it: not the stale answer


def test_before_model_call_counts_before_the_event_fires(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s", context_window_limit=5000)
    conv.append(Message.user("hello"))
    seen: list[tuple[int, int | None, int | None]] = []
    conv.hooks.add_callback(
        BeforeModelCallEvent,
        lambda e: seen.append((e.context.model_call_count, e.projected_input_tokens, e.context_window_limit)),
    )
    conv.before_model_call()
    conv.before_model_call(context_window_limit=100, projected_input_tokens=42)
    assert seen[0][0] == 1
    assert seen[0][1] == conv.projected_input_tokens()
    assert seen[0][2] == 5000
    assert seen[1] == (2, 42, 100)
    assert Conversation(memory_store, "s").model_call_count == 2


def test_after_model_call_returns_the_retry_decision(conv: Conversation) -> None:
    conv.hooks.add_callback(AfterModelCallEvent, _retry_on_error)
    assert conv.after_model_call(None) is False
    assert conv.after_model_call(RuntimeError("transient")) is True


def _retry_on_error(event: AfterModelCallEvent) -> None:
    if event.error is not None:
        event.retry_model_call = True


def test_message_added_fires_after_the_commit(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s")
    versions: list[tuple[str, int]] = []
    conv.hooks.add_callback(MessageAddedEvent, lambda e: versions.append((e.message.plain_text, e.context.version)))
    conv.append(Message.user("a"), Message.assistant("b"))
    assert versions == [("a", 1), ("b", 1)]


def test_a_callback_requests_and_the_conversation_commits(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s", manager=SlidingWindowConversationManager(window_size=2))
    conv.append(Message.user("a"), Message.assistant("b"), Message.user("c"), Message.assistant("d"))
    seen: list[int] = []

    def callback(event: AfterInvocationEvent) -> None:
        seen.append(len(event.context.view))
        with pytest.raises(ConfigurationError, match="unknown trigger"):
            event.request_reduction("later")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="unknown reduction request option"):
            event.request_reduction("manual", window=3)

    conv.hooks.add_callback(AfterInvocationEvent, callback)
    conv.after_invocation()
    # The manager's callback requested end_of_invocation; the conversation committed it once.
    assert seen == [4]
    assert [r.trigger for r in memory_store.reductions("s", "default")] == ["end_of_invocation"]
    assert len(conv.view) == 2
