"""The model input of a ``Runner`` call, made from the ledger: pure helpers of :class:`LedgerSession`.

The SDK builds each call's input from the history it read from the session when the run
started plus the items of the run, in memory, and hands it to
``RunConfig.call_model_input_filter`` right before the model call. The session's filter
replaces that input with the ledger's managed view, so a reduction made for a call
reaches that very call and ``view_at(model_call=N)`` is the input of call ``N`` by
construction. Two things are worked out here, without I/O:

* :func:`unsaved_items` -- the items of the runner's input the ledger does not hold yet
  (a streamed run saves its new input only after the model call started); the session
  appends them before the call and skips them when the SDK saves them.
* :func:`mirror_filter` -- what an input filter of the application (the SDK's
  ``ToolOutputTrimmer``, say) changed in the view's items, as a plan the ledger records
  (as given), so the model's input and the ledger still agree.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contextledger.core.changeset import ContentRevision, ReductionPlan
from contextledger.core.view import View
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.openai_agents.items import item_to_message

__all__ = ["mirror_filter", "unsaved_items"]

Item = Mapping[str, Any]


def _key(item: Item) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def unsaved_items(
    runner_items: Sequence[Item],
    read: Sequence[Item] | None,
    added: Sequence[Item],
    held: Callable[[], Sequence[Item]],
) -> list[Item]:
    """The tail of ``runner_items`` the ledger does not hold yet.

    Args:
        runner_items: The input the runner built for this call.
        read: What the session's last ``get_items`` returned (the history the run started
            from), ``None`` when it was not read.
        added: The items stored since that read, in order.
        held: Every item the ledger holds now (its view), asked for only when the runner's
            input is not ``read + added + ...`` (a ``session_input_callback`` reshaped the history).

    Returns:
        The items after ``read + added`` when the runner's input starts with them; else the
        longest tail of items none of which the ledger holds (matched by value, counting
        repeats).
    """
    if read is not None:
        start, end = len(read), len(read) + len(added)
        if list(runner_items[:start]) == list(read) and list(runner_items[start:end]) == list(added):
            return list(runner_items[end:])
    stored = Counter(_key(item) for item in held())
    cut = len(runner_items)
    while cut > 0 and stored[_key(runner_items[cut - 1])] == 0:
        cut -= 1
    return list(runner_items[cut:])


def mirror_filter(
    view: View, given: Sequence[Sequence[Item]], returned: Sequence[Item], strategy: str
) -> ReductionPlan | None:
    """The plan that makes the view say what an application's input filter made of its items.

    Args:
        view: The active view.
        given: The items of each view entry, in order, as handed to the filter.
        returned: What the filter returned.
        strategy: The name recorded on the reduction.

    An item changed in place becomes a content revision of its entry (the original stays
    in the ledger), an entry whose items were all left out is evicted.

    Raises:
        ConfigurationError: The filter added items, reordered them, dropped part of an
            entry, or made an item the ledger cannot read: such an input cannot be
            recorded as the view.
    """
    if len(given) != len(view):
        raise ConfigurationError(f"{len(given)} groups of items for {len(view)} view entries")
    revisions: list[ContentRevision] = []
    evict: list[str] = []
    position = 0
    for entry, items in zip(view, given, strict=True):
        ahead = list(returned[position : position + len(items)])
        if len(ahead) == len(items) and all(a == b or _same_item(b, a) for a, b in zip(ahead, items, strict=True)):
            position += len(items)
            if ahead != list(items):
                if len(items) != 1 or entry.kind != "message":
                    raise ConfigurationError(
                        f"the input filter changed entry {entry.entry_id}, which is not one item the ledger"
                        " can revise (a summary or a message rendered as several items)"
                    )
                try:
                    content = item_to_message(ahead[0]).content
                except InvalidMessage as exc:
                    raise ConfigurationError(
                        f"the input filter returned an item the ledger cannot keep: {exc}"
                    ) from exc
                revisions.append(ContentRevision(message_id=entry.entry_id, content=content, reason="input_filter"))
            continue
        evict.append(entry.entry_id)
    if position != len(returned):
        raise ConfigurationError(
            f"the input filter added, reordered or split items ({len(returned) - position} left over): an input"
            " filter used with LedgerSession may change items in place or drop whole ones, nothing else"
        )
    if not revisions and not evict:
        return None
    return ReductionPlan(
        strategy=strategy, evict=tuple(evict), revisions=tuple(revisions), detail="the application's input filter"
    )


def _same_item(before: Item, after: Item) -> bool:
    """Whether ``after`` is ``before`` changed in place: same type and the same call or item id."""
    return all(before.get(key) == after.get(key) for key in ("type", "role", "call_id", "id"))
