"""Opening and reading never write; a crash mid-tool is repaired inside the next real write."""

from __future__ import annotations

from contextledger import Ledger, Message, SlidingWindowConversationManager
from contextledger.conversation.conversation import INTERRUPTED_TOOL_TEXT
from contextledger.stores.capabilities import CompleteStore


def crashed(store: CompleteStore) -> int:
    """A conversation left mid-tool; returns its version."""
    conv = Ledger(store).conversation("s")
    conv.append(Message.user("run it"), Message.tool_use("t1", "shell", {"cmd": "sleep 100"}))
    return conv.version


def test_opening_and_reading_a_conversation_mid_tool_writes_nothing(store: CompleteStore) -> None:
    version = crashed(store)
    ledger = Ledger(store)
    for _ in range(2):
        conv = ledger.conversation("s", manager=SlidingWindowConversationManager(window_size=2))
        assert conv.view.dangling_tool_uses() == ["t1"]
        ledger.history("s")
        ledger.reductions("s")
        conv.preview()
        assert conv.version == version
    assert ledger.conversation("s").version == version
    assert ledger.reductions("s") == []


def test_the_missing_result_arriving_is_not_repaired(store: CompleteStore) -> None:
    version = crashed(store)
    conv = Ledger(store).conversation("s")
    conv.append(Message.tool_result("t1", "done"), Message.assistant("finished"))
    assert conv.version == version + 1
    assert Ledger(store).reductions("s") == []
    assert conv.view.dangling_tool_uses() == []
    assert conv.view[2].message.plain_text == "done"


def test_a_new_user_message_carries_the_repair_in_its_changeset(store: CompleteStore) -> None:
    version = crashed(store)
    conv = Ledger(store).conversation("s")
    conv.append(Message.user("are you there?"))
    assert conv.version == version + 1
    (reduction,) = Ledger(store).reductions("s")
    assert (reduction.trigger, reduction.strategy) == ("restore", "tool_pair_repair")
    assert [e.message.plain_text for e in conv.view][-2:] == [INTERRUPTED_TOOL_TEXT, "are you there?"]
    assert conv.view.dangling_tool_uses() == []
    assert Ledger(store).conversation("s").view.ids == conv.view.ids


def test_a_model_call_carries_the_repair_with_its_count(store: CompleteStore) -> None:
    version = crashed(store)
    conv = Ledger(store).conversation("s")
    conv.before_model_call()
    assert conv.version == version + 1
    restored = Ledger(store).conversation("s")
    assert restored.model_call_count == 1
    assert restored.view.dangling_tool_uses() == []
    (reduction,) = Ledger(store).reductions("s")
    assert reduction.strategy == "tool_pair_repair"


def test_a_reduction_in_the_same_model_call_commits_after_the_repair(memory_store: CompleteStore) -> None:
    conv = Ledger(memory_store).conversation("s")
    conv.append(*[Message.user(f"q{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(6)])
    conv.append(Message.user("run it"), Message.tool_use("t1", "shell", {}))
    manager = SlidingWindowConversationManager(window_size=3, per_turn=True)
    reopened = Ledger(memory_store).conversation("s", manager=manager)
    reopened.before_model_call()
    strategies = [r.strategy for r in Ledger(memory_store).reductions("s")]
    assert strategies == ["tool_pair_repair", "sliding_window"]
    assert reopened.view.dangling_tool_uses() == []
    assert reopened.view[0].message.role == "user"
    assert Ledger(memory_store).conversation("s").model_call_count == 1


def test_repair_can_be_turned_off(memory_store: CompleteStore) -> None:
    crashed(memory_store)
    conv = Ledger(memory_store).conversation("s", repair=False)
    conv.append(Message.user("are you there?"))
    assert conv.view.dangling_tool_uses() == ["t1"]
    assert conv.repair_interrupted_tools() is not None
    assert conv.view.dangling_tool_uses() == []
