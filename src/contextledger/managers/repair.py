"""The repair of a view left mid-tool by a crash: a policy, pure like the managers.

A process that dies after the model asked for a tool and before the result was stored
leaves a toolUse without its toolResult; a provider rejects such a view. Opening a
conversation never writes, so the repair is made by the next real write that is not
the missing result itself (a new user message, a model call), inside that write's
changeset, recorded as a ``restore``/``tool_pair_repair`` reduction.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from contextledger.core.changeset import ContentRevision, Edit, ReductionPlan
from contextledger.core.view import View
from contextledger.model.messages import Message

__all__ = [
    "INTERRUPTED_TOOL_TEXT",
    "REPAIR_STRATEGY",
    "log_repair",
    "needs_repair",
    "plan_repair",
    "repair_id",
    "with_repair",
]

# The conversation writes this line; applications filter on its logger's name.
logger = logging.getLogger("contextledger.conversation.conversation")

INTERRUPTED_TOOL_TEXT = "Tool execution was interrupted before it returned a result."

REPAIR_STRATEGY = "tool_pair_repair"


def needs_repair(view: View, appends: Iterable[Message] = ()) -> bool:
    """Whether ``view`` is broken mid-tool and ``appends`` are not the missing results.

    Appends that answer any dangling toolUse are the tool run finishing, not a crash:
    they are left to complete the pair themselves.
    """
    dangling = set(view.dangling_tool_uses())
    if not dangling and not view.orphan_results():
        return False
    answered = {t for m in appends for t in m.tool_result_ids}
    return not (dangling & answered)


def plan_repair(view: View, next_seq: int) -> Edit | None:
    """The edit that makes ``view`` valid again, or ``None`` when it is.

    A toolUse without a result in the last entry gets an error toolResult appended;
    any other orphan call or result is revised away (the original is kept as a revision).

    The appended result's id is derived from the interrupted message and ``next_seq`` (the
    conversation's next seq, which only grows): the same state always gives the same id,
    so a host that shows the repair before the next write commits it shows the same entry,
    and a second repair of the same message (the first one was evicted since) gets an id
    of its own instead of colliding with the first.
    """
    dangling = set(view.dangling_tool_uses())
    orphans = set(view.orphan_results())
    if not dangling and not orphans:
        return None
    tail = set(view[-1].message.tool_use_ids) & dangling if len(view) else set()
    appends: tuple[Message, ...] = ()
    if tail:
        appends = (
            Message(
                # Derived from the interrupted message, so a host that shows the repair before
                # the next write commits it (a restored Strands agent) shows the same entry.
                message_id=repair_id(view[-1].entry_id, next_seq),
                role="user",
                content=[
                    {
                        "toolResult": {
                            "toolUseId": t,
                            "status": "error",
                            "content": [{"text": INTERRUPTED_TOOL_TEXT}],
                        }
                    }
                    for t in sorted(tail)
                ],
                metadata={"custom": {"contextledger": {"repair": "interrupted_tool"}}},
            ),
        )
    revisions: list[ContentRevision] = []
    for entry in view:
        drop = (set(entry.message.tool_use_ids) & (dangling - tail)) | (set(entry.message.tool_result_ids) & orphans)
        if not drop or entry.kind != "message":
            continue
        kept = [b for b in entry.message.content if _block_tool_id(b) not in drop]
        revisions.append(
            ContentRevision(
                message_id=entry.entry_id,
                content=kept or [{"text": "[interrupted tool call removed]"}],
                reason="repair_orphan_tool_block",
            )
        )
    plan = ReductionPlan(strategy=REPAIR_STRATEGY, revisions=tuple(revisions), detail="interrupted tool call")
    return Edit(appends=appends, plan=plan if revisions else None, trigger="restore", strategy=REPAIR_STRATEGY)


def repair_id(entry_id: str, next_seq: int) -> str:
    """The id of the result that stands in for ``entry_id``'s interrupted tool calls (see :func:`plan_repair`)."""
    return "repair-" + hashlib.sha256(f"{entry_id}\x00{next_seq}".encode()).hexdigest()[:32]


def with_repair(view: View, edit: Edit, next_seq: int) -> Edit:
    """``edit`` (appends, pins, agent state; no reduction) with the repair of ``view`` in front of it.

    The repair and the write that made it due go into one changeset; ``next_seq`` is the
    conversation's (see :func:`plan_repair`).
    """
    repair = plan_repair(view, next_seq)
    if repair is None:
        return edit
    return repair.model_copy(
        update={
            "appends": (*repair.appends, *edit.appends),
            "pins": edit.pins,
            "pin_source": edit.pin_source,
            "agent_state": edit.agent_state,
        }
    )


def log_repair(session_id: str, agent_id: str) -> None:
    """Warn that a write also repairs a conversation a crash left mid-tool."""
    logger.warning(
        "session_id=<%s>, agent_id=<%s> | conversation was interrupted mid-tool; repaired in this write",
        session_id,
        agent_id,
    )


def _block_tool_id(block: Mapping[str, Any]) -> str | None:
    for key in ("toolUse", "toolResult"):
        if key in block:
            value = block[key].get("toolUseId")
            return str(value) if value is not None else None
    return None
