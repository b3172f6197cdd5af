"""Keep the last N user turns (and every system message); optionally drop finished tool sequences."""

from __future__ import annotations

from typing import ClassVar

from contextledger.core.changeset import ReductionPlan, ReductionRequest
from contextledger.core.view import View
from contextledger.managers.options import Option, TurnWindowOptions
from contextledger.managers.policy import (
    PolicyManager,
    ProactiveCompression,
    ProtectedSpec,
    entry_ids,
    evictable_groups,
)
from contextledger.model.messages import Message

__all__ = ["TurnWindowConversationManager", "complete_tool_sequences", "is_user_turn"]


def is_user_turn(message: Message) -> bool:
    """Whether ``message`` starts a user turn: a user message that is not only tool results."""
    return message.role == "user" and any("toolResult" not in block for block in message.content)


def _only_tool_results(message: Message) -> bool:
    return message.role == "user" and all("toolResult" in block for block in message.content)


def complete_tool_sequences(view: View) -> list[list[int]]:
    """The complete tool sequences of ``view``, in order.

    A complete sequence is an assistant toolUse message, then only tool-result messages
    and further assistant toolUse messages, ending with an assistant answer without
    toolUse, where every call has its result inside the sequence (and every result its
    call). A sequence cut short -- by a user turn, a summary, a system message or the end
    of the view -- is incomplete and not returned.
    """
    out: list[list[int]] = []
    index = 0
    size = len(view)
    while index < size:
        entry = view[index]
        if entry.kind != "message" or entry.message.role != "assistant" or not entry.message.tool_use_ids:
            index += 1
            continue
        members = [index]
        cursor = index + 1
        complete = False
        while cursor < size:
            nxt = view[cursor]
            message = nxt.message
            if nxt.kind != "message":
                break
            if message.role == "assistant":
                members.append(cursor)
                cursor += 1
                if not message.tool_use_ids:
                    complete = True
                    break
                continue
            if _only_tool_results(message):
                members.append(cursor)
                cursor += 1
                continue
            break
        if complete:
            inside = set(members)
            uses = {t for i in members for t in view[i].message.tool_use_ids}
            results = {t for i in members for t in view[i].message.tool_result_ids}
            if uses == results and all(set(view.group_of(i)) <= inside for i in members):
                out.append(members)
        index = cursor if complete else max(cursor, index + 1)
    return out


class TurnWindowConversationManager(PolicyManager):
    """Keep the last ``max_user_turns`` user turns and every system message.

    A user turn starts at a user message that is not only tool results. Everything
    before the first kept turn is evicted except system messages, pinned entries (with
    their tool-pair partners) and the protected first/last ranges; tool-pair groups are
    never split. With ``remove_tool_messages=True`` complete tool sequences (see
    :func:`complete_tool_sequences`) are evicted too, an incomplete one never. A pinned
    assistant message that would open the view keeps the prompt before it.

    Runs at the end of every invocation and on a context-window overflow (and
    proactively when ``proactive_compression`` is set). A reactive or proactive
    reduction that finds nothing to do by those rules drops the oldest user turn that
    has something evictable, keeping at least the last turn; when nothing can go the
    conversation raises :class:`~contextledger.errors.ReductionFailed` (reactive).

    Args:
        max_user_turns: User turns kept (>= 1).
        remove_tool_messages: Also evict complete tool sequences.
        proactive_compression: ``True``, ``{"compression_threshold": x}`` or ``None``.
        protected_messages: ``{"first": N, "last": M}`` entries never evicted.

    Options can be changed at run time (``manager.max_user_turns = 5``); an invalid
    value raises and leaves the option as it was.

    Raises:
        ConfigurationError: An option is invalid.
    """

    name: str = "turn_window"
    manages_end_of_invocation: ClassVar[bool] = True
    options_model = TurnWindowOptions
    options: TurnWindowOptions

    max_user_turns = Option[int, int]()
    remove_tool_messages = Option[bool, bool]()

    def __init__(
        self,
        max_user_turns: int,
        remove_tool_messages: bool = False,
        *,
        proactive_compression: ProactiveCompression = None,
        protected_messages: ProtectedSpec = None,
    ) -> None:
        """Validate and keep the options; see the class docstring."""
        super().__init__(
            max_user_turns=max_user_turns,
            remove_tool_messages=remove_tool_messages,
            proactive_compression=proactive_compression,
            protected_messages=protected_messages,
        )

    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Evict turns beyond the window (and complete tool sequences when asked)."""
        protected = self.protected(view)
        protected.update(i for i, e in enumerate(view) if e.message.role == "system")
        groups = evictable_groups(view, protected)
        starts = [i for i, e in enumerate(view) if e.kind == "message" and is_user_turn(e.message)]
        max_turns = self.options.max_user_turns
        evict: set[int] = set()
        if len(starts) > max_turns:
            evict |= _before(groups, starts[-max_turns])
        if self.options.remove_tool_messages:
            allowed = {i for g in groups for i in g}
            for sequence in complete_tool_sequences(view):
                if set(sequence) <= allowed:
                    evict.update(sequence)
        reason = f"kept the last {max_turns} user turn(s)"
        plan = self._fitted(view, evict, protected)
        if plan is None and request.trigger in ("reactive", "proactive"):
            # Must shrink: drop the oldest turn that has anything evictable, keep the last.
            for cutoff in starts[1:]:
                plan = self._fitted(view, _before(groups, cutoff), protected)
                if plan is not None:
                    reason = "dropped the oldest user turn"
                    break
        if plan is None:
            return None
        return plan.model_copy(update={"detail": f"{reason}; evicted {len(plan.evict)} of {len(view)} entries"})

    def blocked(self, view: View, request: ReductionRequest) -> str | None:
        """Why nothing could be evicted although a reduction was forced or the view is over its turns."""
        starts = sum(e.kind == "message" and is_user_turn(e.message) for e in view)
        if request.trigger in ("reactive", "proactive") or starts > self.options.max_user_turns:
            return f"{starts} user turns but nothing can be evicted: every entry is pinned, protected or recent"
        return None

    def _fitted(self, view: View, evict: set[int], protected: set[int]) -> ReductionPlan | None:
        if not evict:
            return None
        return self.fit(view, ReductionPlan(strategy=self.name, evict=entry_ids(view, sorted(evict))), protected)


def _before(groups: list[list[int]], cutoff: int) -> set[int]:
    """Members of the evictable groups that lie wholly before ``cutoff``."""
    return {i for g in groups if g[-1] < cutoff for i in g}
