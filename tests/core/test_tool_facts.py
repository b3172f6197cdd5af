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
