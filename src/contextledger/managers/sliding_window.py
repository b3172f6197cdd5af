"""Keep the newest ``window_size`` entries, evicting whole tool-pair groups, oldest first."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from contextledger.core.changeset import ContentRevision, ReductionPlan, ReductionRequest
from contextledger.core.hooks import ConversationContext
from contextledger.core.view import View
from contextledger.managers.options import Option, SlidingWindowOptions
from contextledger.managers.policy import (
    PolicyManager,
    ProactiveCompression,
    ProtectedSpec,
    entry_ids,
    evictable_groups,
)
from contextledger.model.messages import ContentBlock

__all__ = ["SlidingWindowConversationManager", "truncate_tool_result_content"]

_MEDIA_KINDS = ("image", "document", "video", "audio")


class SlidingWindowConversationManager(PolicyManager):
    """Evict the oldest entries so the view holds at most ``window_size`` of them.

    When it runs:

    * ``per_turn=True`` before every model call, ``per_turn=N`` before every N-th
      (``model_call_count % N == 0``), ``per_turn=False`` never; checked in the
      callback, so ``manager.per_turn = 3`` works at run time;
    * at the end of every invocation (trigger ``end_of_invocation``);
    * proactively, when ``proactive_compression`` is set and the projected input reaches
      the threshold of the context window;
    * reactively, after a context-window overflow.

    How it trims: whole tool-pair groups (a toolUse with all its results) are evicted
    oldest first until ``len(view) <= window_size`` (the newest user prompt stays, so a
    long tool loop after it is trimmed behind it), then the boundary advances to the
    next user prompt (as Strands' trim point does), so the view never opens with an
    assistant message or a toolResult; where a pinned or protected entry stops the
    boundary it moves back to the prompt before it instead. A group is never evicted
    when any member is pinned, inside the protected first/last ranges, or the newest
    user prompt. Per-turn and end-of-invocation reductions only trim, and only when the
    view is over the window. A proactive reduction evicts at least the oldest evictable
    turn even within the window. A reactive reduction first truncates oversized tool
    results outside the most recent turn (``should_truncate_results``; the original
    content is kept as a revision), then trims to the window; when neither changed
    anything it evicts the oldest evictable turn; when nothing can go the conversation
    raises :class:`~contextledger.errors.ReductionFailed`.

    Args:
        window_size: Maximum number of entries kept (>= 1).
        should_truncate_results: Truncate old, oversized tool results on overflow.
        per_turn: ``True``, ``False`` or an int >= 1 (see above).
        proactive_compression: ``True``, ``{"compression_threshold": x}`` or ``None``.
        protected_messages: ``{"first": N, "last": M}`` entries never evicted.
        truncate_threshold: Characters above which a tool-result text block is truncated
            (head and tail kept around a marker); >= 100.

    Raises:
        ConfigurationError: An option is invalid (also on assignment at run time).
    """

    name: str = "sliding_window"
    manages_end_of_invocation: ClassVar[bool] = True
    options_model = SlidingWindowOptions
    options: SlidingWindowOptions

    window_size = Option[int, int]()
    should_truncate_results = Option[bool, bool]()
    per_turn = Option[bool | int, bool | int]()
    truncate_threshold = Option[int, int]()

    def __init__(
        self,
        window_size: int = 40,
        should_truncate_results: bool = True,
        *,
        per_turn: bool | int = False,
        proactive_compression: ProactiveCompression = None,
        protected_messages: ProtectedSpec = None,
        truncate_threshold: int = 2000,
    ) -> None:
        """Validate and keep the options; see the class docstring."""
        super().__init__(
            window_size=window_size,
            should_truncate_results=should_truncate_results,
            per_turn=per_turn,
            proactive_compression=proactive_compression,
            protected_messages=protected_messages,
            truncate_threshold=truncate_threshold,
        )

    def per_turn_due(self, context: ConversationContext) -> bool:
        """Whether this model call (already counted) gets a ``per_turn`` reduction.

        Not when the view is within the window with nothing to trim (the plan would be
        empty): the check before every model call then asks for nothing at all.
        """
        per_turn = self.options.per_turn
        due = per_turn if per_turn is True or per_turn is False else context.model_call_count % per_turn == 0
        return due and not self._within_window(context.view)

    def _within_window(self, view: View) -> bool:
        # Within the window nothing is trimmed but a leading orphan result (see _trim).
        return len(view) <= self.options.window_size and (not view or not view.tool_result_ids_at(0))

    # -- planning --------------------------------------------------------------------------

    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Trim (and on overflow truncate) as described in the class docstring."""
        if request.trigger not in ("reactive", "proactive") and self._within_window(view):
            return None
        protected = self.protected(view)
        revisions: tuple[ContentRevision, ...] = ()
        if request.trigger == "reactive" and self.options.should_truncate_results:
            revisions = self._truncations(view, protected)
        # A proactive or reactive reduction must shrink something even within the window.
        force = request.trigger in ("reactive", "proactive") and not revisions
        groups = evictable_groups(view, protected)
        extra = 0
        while True:
            evict = self._trim(view, groups, protected, force=force, extra=extra)
            if not evict and not revisions:
                return None
            plan = self.fit(
                view, ReductionPlan(strategy=self.name, evict=entry_ids(view, evict), revisions=revisions), protected
            )
            # A forced eviction that the view rules undo takes one more group, until one holds.
            if not force or (plan is not None and plan.evict) or extra >= len(groups):
                break
            extra += 1
        if plan is None:
            return None
        details = []
        if plan.revisions:
            details.append(f"truncated {len(plan.revisions)} tool result(s)")
        if plan.evict:
            details.append(f"evicted {len(plan.evict)} of {len(view)} entries (window {self.options.window_size})")
        return plan.model_copy(update={"detail": "; ".join(details)})

    def blocked(self, view: View, request: ReductionRequest) -> str | None:
        """Why nothing could be evicted although the view is over the window (or overflowed)."""
        if request.trigger in ("reactive", "proactive") or len(view) > self.options.window_size:
            return (
                f"{len(view)} entries (window {self.options.window_size}) but nothing can be evicted:"
                " every entry is pinned, protected, or the newest prompt"
            )
        return None

    def _trim(self, view: View, groups: list[list[int]], protected: set[int], *, force: bool, extra: int) -> list[int]:
        remaining = len(view)
        removed: set[int] = set()
        for taken, group in enumerate(groups):
            over = remaining > self.options.window_size
            if not over and not (force and taken <= extra):
                break
            removed.update(group)
            remaining -= len(group)
        # A view left starting with a result whose call is gone (an orphan that predates
        # this reduction) would be rejected by the model: take it out too when allowed.
        evictable = {g[0]: g for g in groups}
        for index in range(len(view)):
            if index in removed:
                continue
            group = view.group_of(index)
            if not view[index].message.tool_result_ids or group[0] != index or index not in evictable:
                break
            removed.update(group)
        return sorted(removed)

    def _truncations(self, view: View, protected: set[int]) -> tuple[ContentRevision, ...]:
        recent = _recent_turn_start(view)
        found: list[tuple[int, ContentRevision]] = []
        for index, entry in enumerate(view.entries[:recent]):
            if entry.kind != "message" or index in protected or not entry.message.tool_result_ids:
                continue
            if view.is_pinned(index):
                continue
            content, saved = truncate_tool_result_content(entry.message.content, self.options.truncate_threshold)
            if saved:
                found.append((saved, ContentRevision(message_id=entry.entry_id, content=content)))
        # Largest first: the order the revisions are recorded in.
        found.sort(key=lambda item: -item[0])
        return tuple(revision for _, revision in found)


def _recent_turn_start(view: View) -> int:
    """Index where the most recent turn starts: the last assistant message (or the end)."""
    for index in range(len(view) - 1, -1, -1):
        if view[index].message.role == "assistant":
            return index
    return len(view)


def truncate_tool_result_content(content: list[ContentBlock], threshold: int) -> tuple[list[ContentBlock], int]:
    """Shorten the toolResult blocks of ``content``.

    Text (and JSON rendered as text) longer than ``threshold`` characters keeps its head
    and tail around a marker; media blocks inside a result become a short text marker.
    Other blocks are kept verbatim. The output of this function is never truncated again.

    Returns:
        The new content and an estimate of the characters saved (0 when nothing changed).
    """
    saved = 0
    out: list[ContentBlock] = []
    for block in content:
        if "toolResult" not in block:
            out.append(block)
            continue
        result: dict[str, Any] = dict(block["toolResult"])
        inner: list[ContentBlock] = []
        for item in result.get("content", []):
            new_item, item_saved = _truncate_item(item, threshold)
            inner.append(new_item)
            saved += item_saved
        result["content"] = inner
        out.append({**block, "toolResult": result})
    return (out, saved) if saved else (list(content), 0)


def _truncate_item(item: Mapping[str, Any], threshold: int) -> tuple[ContentBlock, int]:
    if isinstance(item.get("text"), str):
        text: str = item["text"]
    elif "json" in item:
        text = json.dumps(item["json"], default=str, ensure_ascii=False)
        if len(text) <= threshold:
            return dict(item), 0
    else:
        kind = next((k for k in _MEDIA_KINDS if k in item), None)
        if kind is None:
            return dict(item), 0
        marker = f"[{kind} removed from an old tool result to fit the context window]"
        return {"text": marker}, max(1, threshold // 2)
    if len(text) <= threshold:
        return dict(item), 0
    keep = threshold // 2
    head, tail = keep * 3 // 4, keep // 4
    removed = len(text) - head - tail
    marker = f"\n... [{removed} characters truncated to fit the context window] ...\n"
    return {"text": text[:head] + marker + text[len(text) - tail :]}, removed - len(marker)
