from __future__ import annotations

from collections.abc import Callable

import pytest

from contextledger import (
    Conversation,
    PolicyManager,
    PolicyState,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
    TurnWindowConversationManager,
)
from contextledger.conversation.conversation import Edit
from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError
from contextledger.managers.base import ConversationManager, ManagerState
from contextledger.stores.capabilities import CompleteStore
from tests.managers.helpers import chat, model_call, overflow

FACTORIES: dict[str, Callable[[], PolicyManager]] = {
    "sliding_window": lambda: SlidingWindowConversationManager(window_size=4),
    "summarizing": lambda: SummarizingConversationManager(preserve_recent_messages=2),
    "turn_window": lambda: TurnWindowConversationManager(max_user_turns=2),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_state_is_typed_committed_and_restored(memory_store: CompleteStore, name: str) -> None:
    manager = FACTORIES[name]()
    assert isinstance(manager, ConversationManager)
    assert manager.name == name
    conv = Conversation(memory_store, "s", manager=manager)
    conv.append(*chat(12))
    assert model_call(conv, error=overflow()) is True
    state = manager.state
    assert isinstance(state, PolicyState)
    assert isinstance(state, ManagerState)
    assert state.manager == name
    assert state.reductions == 1
    assert state.removed == len(memory_store.reductions("s", "default")[0].evicted)
    assert state.summaries == (1 if name == "summarizing" else 0)
    # The state rode along with the reduction's commit.
    snapshot = memory_store.load("s", "default")
    assert snapshot is not None
    assert snapshot.state.manager_state == state.model_dump(mode="json")
    restored_manager = FACTORIES[name]()
    Conversation(memory_store, "s", manager=restored_manager)
    assert restored_manager.state == state


@pytest.mark.parametrize(
    "bad",
    [
        "not a dict",
        ["list"],
        {"reductions": 1},  # no owner
        {"manager": "sliding_window", "reductions": -1},
        {"manager": "sliding_window", "reductions": "many"},
        {"manager": "sliding_window", "unknown_field": 1},
    ],
)
def test_bad_state_raises_configuration_error(bad: object) -> None:
    manager = SlidingWindowConversationManager()
    with pytest.raises(ConfigurationError, match="state"):
        manager.restore_state(bad)  # type: ignore[arg-type]


def test_restore_accepts_none_and_another_managers_state() -> None:
    manager = SlidingWindowConversationManager()
    manager.restore_state({"manager": "sliding_window", "reductions": 4, "removed": 9})
    assert manager.state.reductions == 4
    manager.restore_state(None)
    assert manager.state == PolicyState(manager="sliding_window")
    manager.restore_state({"manager": "summarizing", "summaries": 2})
    assert manager.state == PolicyState(manager="sliding_window")


def test_a_bad_stored_state_fails_to_open_and_loses_nothing(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s", manager=SlidingWindowConversationManager())
    conv.append(*chat(4))
    before = memory_store.load("s", "default")
    conv.edit(lambda _v: Edit(agent_state={"k": 1}))
    # A state written by a newer version, with a field this one does not know.
    memory_store.commit(
        Changeset(
            session_id="s",
            agent_id="default",
            expected_version=conv.version,
            manager_state={"manager": "sliding_window", "from_the_future": True},
        )
    )
    with pytest.raises(ConfigurationError, match="from_the_future"):
        Conversation(memory_store, "s", manager=SlidingWindowConversationManager())
    after = memory_store.load("s", "default")
    assert before is not None
    assert after is not None
    assert after.entries == before.entries


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_the_export_follows_every_change_of_state(memory_store: CompleteStore, name: str) -> None:
    # The JSON of a state is made once per state (every commit carries it): it must never go stale.
    manager = FACTORIES[name]()
    first = manager.export_state()
    assert first == manager.state.model_dump(mode="json")
    assert manager.export_state() is first  # the same state: its JSON made once
    manager.restore_state({"manager": name, "reductions": 3, "removed": 7})
    assert manager.export_state() == manager.state.model_dump(mode="json")
    assert manager.export_state() != first
    conv = Conversation(memory_store, "s", manager=manager)
    assert manager.export_state() == first  # the conversation is new: the manager starts fresh
    conv.append(*chat(12))
    assert model_call(conv, error=overflow()) is True
    assert manager.state.reductions == 1
    exported = manager.export_state()
    assert exported == manager.state.model_dump(mode="json")
    snapshot = memory_store.load("s", "default")
    assert snapshot is not None
    assert snapshot.state.manager_state == exported
