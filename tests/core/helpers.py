"""A custom manager whose plans a test scripts, and view-rule checks independent of the library's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextledger import AfterInvocationEvent, AfterModelCallEvent, HookRegistry, ReductionPlan, View
from contextledger.core.changeset import ReductionRequest


class ScriptedManager:
    """Plans whatever ``script(view, request)`` returns; reduces reactively and at the end of invocations."""

    name = "scripted"

    def __init__(self, script: Callable[[View, ReductionRequest], ReductionPlan | None]) -> None:
        self.script = script
        self.calls = 0

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(AfterModelCallEvent, self._after_model_call)
        registry.add_callback(AfterInvocationEvent, self._after_invocation)

    @staticmethod
    def _after_invocation(event: AfterInvocationEvent) -> None:
        event.request_reduction("end_of_invocation")

    @staticmethod
    def _after_model_call(event: AfterModelCallEvent) -> None:
        if event.context.overflow:
            event.request_reduction("reactive")

    def plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        self.calls += 1
        return self.script(view, request)

    def export_state(self) -> dict[str, Any] | None:
        return None

    def restore_state(self, state: dict[str, Any] | None) -> None:
        return None


def opens_badly(view: View) -> bool:
    """Whether the view starts (after system messages) with an assistant message or a toolResult."""
    for entry in view:
        if entry.kind == "message" and entry.message.role == "system":
            continue
        if entry.kind == "summary":
            return False
        return entry.message.role == "assistant" or bool(entry.message.tool_result_ids)
    return False


def newest_prompt_id(view: View) -> str | None:
    for entry in reversed(view.entries):
        message = entry.message
        if entry.kind == "message" and message.role == "user" and any("toolResult" not in b for b in message.content):
            return entry.entry_id
    return None


def rule_violations(
    before: View, after: View, summary_id: str | None = None, replaces: tuple[str, ...] = ()
) -> list[str]:
    """What a reduction from ``before`` to ``after`` broke of the view rules (empty: nothing)."""
    found: list[str] = []
    if len(before) and not len(after):
        found.append("emptied the view")
    prompt = newest_prompt_id(before)
    if prompt is not None and after.index_of(prompt) is None:
        found.append("evicted the newest user prompt")
    if opens_badly(after) and not opens_badly(before):
        found.append("the view now opens with an assistant message or a toolResult")
    for entry in before:
        if entry.pinned and after.index_of(entry.entry_id) is None:
            found.append(f"evicted pinned {entry.entry_id}")
    if set(after.dangling_tool_uses()) - set(before.dangling_tool_uses()):
        found.append("left a toolUse without its result")
    if set(after.orphan_results()) - set(before.orphan_results()):
        found.append("left a toolResult without its call")
    if summary_id is not None:
        found += _summary_violations(before, after, summary_id, replaces)
    return found


def _summary_violations(before: View, after: View, summary_id: str, replaces: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    at = after.index_of(summary_id)
    if at is None:
        return ["the summary is not in the view"]
    spots = [i for i in (before.index_of(r) for r in replaces) if i is not None]
    low, high = min(spots), max(spots)
    kept_after = [e.entry_id for e in before.entries[high + 1 :] if after.index_of(e.entry_id) is not None]
    if kept_after and (at + 1 >= len(after) or after[at + 1].entry_id != kept_after[0]):
        found.append("the summary does not stand right before the oldest kept entry after what it replaced")
    inside = [
        e
        for e in before.entries[low : high + 1]
        if e.entry_id not in replaces and after.index_of(e.entry_id) is not None
    ]
    for entry in inside:
        if not entry.pinned and not before.is_pinned(before.index_of(entry.entry_id) or 0):
            found.append(f"kept unpinned {entry.entry_id} inside the summarized span")
        elif (after.index_of(entry.entry_id) or 0) > at:
            found.append(f"pinned {entry.entry_id} of the summarized span stands after the summary")
    order = [after.index_of(e.entry_id) for e in inside]
    if order != sorted(order):  # type: ignore[type-var]
        found.append("pinned entries of the summarized span lost their order")
    return found
