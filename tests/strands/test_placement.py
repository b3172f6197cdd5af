"""``placement``: the usual sync's one comparison gives what the general matching gives.

Every sync of a Strands agent matches the view's entry ids against the agent's message
ids. The agent usually holds the view as it is plus new messages, which one comparison
tells; whatever the agent holds, the result must be the general matching's.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.integrations.strands.diff import Placement, placement
from tests.soak import examples


def _general(view_ids: list[str], ids: list[str]) -> Placement:
    """The matching, one pass per question, as plan_sync did it for every sync."""
    position = {message_id: i for i, message_id in enumerate(ids)}
    retained = [i for i, entry_id in enumerate(view_ids) if entry_id in position]
    removed = [entry_id for entry_id in view_ids if entry_id not in position]
    agent_order = [position[view_ids[i]] for i in retained]
    return Placement(
        retained,
        removed,
        max(agent_order, default=-1),
        [i for i, message_id in enumerate(ids) if message_id not in set(view_ids)],
        agent_order != sorted(agent_order),
    )


def _as_lists(found: Placement) -> tuple[Any, ...]:
    return (list(found.retained), found.removed, found.last_retained, found.new_positions, found.reordered)


# A view of distinct ids, and what an agent makes of it: keeps some, reorders, inserts, appends.
views = st.lists(st.sampled_from([f"m{i}" for i in range(12)]), unique=True, max_size=8)


@st.composite
def agents(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    view_ids = draw(views)
    kept = [i for i in view_ids if draw(st.booleans())] if draw(st.booleans()) else list(view_ids)
    if draw(st.booleans()):
        kept = draw(st.permutations(kept))
    new = draw(st.lists(st.sampled_from([f"n{i}" for i in range(6)]), unique=True, max_size=3))
    at = draw(st.integers(0, len(kept)))
    ids = kept[:at] + new + kept[at:] if draw(st.booleans()) else kept + new
    return view_ids, list(ids)


@settings(max_examples=examples(400), deadline=None)
@given(agents())
def test_it_places_the_view_as_the_general_matching_does(case: tuple[list[str], list[str]]) -> None:
    view_ids, ids = case
    position = {message_id: i for i, message_id in enumerate(ids)}
    assert _as_lists(placement(view_ids, ids, position)) == _as_lists(_general(view_ids, ids))


def test_the_usual_sync_is_one_comparison() -> None:
    view_ids = ["a", "b", "c"]
    ids = ["a", "b", "c", "d"]
    found = placement(view_ids, ids, {m: i for i, m in enumerate(ids)})
    assert isinstance(found.retained, range)  # the view held as it is: no pass over it
    assert _as_lists(found) == ([0, 1, 2], [], 2, [3], False)
