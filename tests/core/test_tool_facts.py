"""A view's tool facts carried over an append equal the facts computed afresh from its entries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextledger import Message
from contextledger.core.viewfacts import ToolFacts
from contextledger.model.records import ViewEntry

_ids = st.sampled_from(["a", "b", "c", "d"])  # few ids: repeats and unpaired ids are common
_message = st.one_of(
    st.builds(lambda t: Message.tool_use(t, "f", {"x": 1}), _ids),
    st.builds(lambda t: Message.tool_result(t, "r"), _ids),
    st.just(Message.user("q")),
)


def _entries(messages: list[Message], start: int) -> list[ViewEntry]:
    return [ViewEntry(entry_id=f"m{start + i}", seq=start + i, message=m, tokens=1) for i, m in enumerate(messages)]


def _facts(f: ToolFacts) -> tuple[object, ...]:
    return (f.dangling, f.orphans, f.unique)


@given(st.lists(_message, max_size=6), st.lists(_message, max_size=6), st.booleans())
def test_extended_facts_equal_the_facts_of_all_entries(
    before: list[Message], after: list[Message], in_place: bool
) -> None:
    first, appended = _entries(before, 0), _entries(after, len(before))
    fresh = ToolFacts.of([*first, *appended])
    carried = ToolFacts.of(first).extended(appended, in_place=in_place)
    assert _facts(carried) == _facts(fresh)
    assert (carried.uses, carried.results) == (fresh.uses, fresh.results)


_turn_message = st.one_of(
    _message,
    st.builds(
        lambda t: Message(
            role="assistant", content=[{"text": "x"}, {"toolUse": {"toolUseId": t, "name": "f", "input": {}}}]
        ),
        _ids,
    ),
    st.builds(
        lambda t, u: Message(
            role="user",
            content=[
                {"toolResult": {"toolUseId": t, "status": "success", "content": [{"text": "r"}]}},
                {"toolResult": {"toolUseId": u, "status": "error", "content": []}},
            ],
        ),
        _ids,
        _ids,
    ),
)


@given(st.lists(st.lists(_turn_message, min_size=1, max_size=4), min_size=1, max_size=5), st.integers(0, 4))
def test_the_facts_an_append_carries_equal_the_facts_of_its_view(turns: list[list[Message]], warm: int) -> None:
    """build_changeset hands the view the tool ids it read: its facts stay those of its entries."""
    from contextledger.core.building import build_changeset
    from contextledger.core.changeset import Edit
    from contextledger.core.view import View
    from contextledger.model.records import ConversationState
    from contextledger.model.tokens import CharTokenCounter

    state = ConversationState(session_id="s", agent_id="a")
    view = View(())
    for number, turn in enumerate(turns):
        if number < warm:  # a view whose facts are known carries them over the append
            view.dangling_tool_uses()
        changeset, view = build_changeset(
            state,
            view,
            Edit.appending([m.model_copy(update={"message_id": f"{number}-{i}"}) for i, m in enumerate(turn)]),
            counter=CharTokenCounter(),
            model_call_count=0,
            count_changed=False,
            manager_state=None,
        )
        state = changeset.state_after(state, state.version + 1)
        fresh = View(view.entries)
        assert view.dangling_tool_uses() == fresh.dangling_tool_uses()
        assert view.orphan_results() == fresh.orphan_results()
        assert view.mid_tool() == bool(fresh.dangling_tool_uses() or fresh.orphan_results())
