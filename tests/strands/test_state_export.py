"""What the Strands integration's manager state exports: shared while unchanged, new as soon as anything changed."""

from __future__ import annotations

from typing import Any

from contextledger import NullConversationManager, SlidingWindowConversationManager
from contextledger.integrations.strands.state import StrandsState


class _EditsInPlace(NullConversationManager):
    """A manager handing out one dict it later edits in place (the contract asks for a new one; be safe anyway)."""

    def __init__(self) -> None:
        self.held: dict[str, Any] = {"manager": "edits", "seen": 0}

    def export_state(self) -> dict[str, Any] | None:
        return self.held


def test_export_is_the_same_dict_until_the_captured_state_changes() -> None:
    state = StrandsState()
    first = state.export_state()
    assert first is not None
    assert first["manager"] == "strands"
    assert first["conversation_manager"] is None
    assert state.export_state() is first
    assert not state.differs_from(first)

    state.capture("SlidingWindowConversationManager", {"removed_message_count": 2}, {"model_state": {}})
    second = state.export_state()
    assert second is not first
    assert first["conversation_manager"] is None, "the first export was changed"
    assert second is not None
    assert second["conversation_manager"] == {"removed_message_count": 2}
    assert state.differs_from(first)
    assert not state.differs_from(second)
    assert state.export_state() is second

    state.capture("SlidingWindowConversationManager", {"removed_message_count": 3}, {"model_state": {}})
    third = state.export_state()
    assert third is not None
    assert third["conversation_manager"] == {"removed_message_count": 3}
    assert second["conversation_manager"] == {"removed_message_count": 2}


def test_export_follows_the_inner_managers_state() -> None:
    inner = SlidingWindowConversationManager(window_size=4)
    state = StrandsState(inner)
    first = state.export_state()
    assert first is not None
    assert first["inner"] == inner.export_state()
    assert state.export_state() is first

    moved = dict(inner.export_state() or {}, reductions=1, removed=4)
    inner.restore_state(moved)
    second = state.export_state()
    assert second is not first
    assert second is not None
    assert second["inner"]["reductions"] == 1
    assert second["inner"]["removed"] == 4
    assert first["inner"]["reductions"] == 0


def test_an_inner_state_edited_in_place_is_exported_as_edited() -> None:
    inner = _EditsInPlace()
    state = StrandsState(inner)
    first = state.export_state()
    assert first is not None
    assert first["inner"] == {"manager": "edits", "seen": 0}
    inner.held["seen"] = 1
    second = state.export_state()
    assert second is not None
    assert second["inner"] == {"manager": "edits", "seen": 1}
    assert first["inner"] == {"manager": "edits", "seen": 0}, "the export kept a reference to the manager's dict"
