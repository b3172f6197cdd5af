"""What erasure and pruning leave in place of what they remove.

An erased message keeps its place and its tool structure (:func:`erase_blocks`), the
summaries that covered it (:func:`summaries_covering`) lose their text
(:data:`REDACTED_TEXT`), and every erased or pruned entry leaves a tombstone (a pruned
one's reason: :data:`PRUNE_REASON`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.model.messages import ContentBlock
from contextledger.model.records import SummaryEntry

__all__ = ["ERASED_TEXT", "PRUNE_REASON", "REDACTED_TEXT", "erase_blocks", "summaries_covering"]

ERASED_TEXT = "[erased]"
"""What an erased block says in its place."""
REDACTED_TEXT = "[redacted: this summary covered an erased entry]"
"""The text of a summary that covered an erased entry (when no summarizer rewrites it)."""
PRUNE_REASON = "prune"
"""The reason on the tombstone of a pruned entry."""


def erase_blocks(content: Sequence[ContentBlock]) -> list[ContentBlock]:
    """``content`` with every payload removed but its tool structure kept.

    Text, images, documents and reasoning become ``[erased]`` text; a toolUse keeps its id
    and name with an empty input; a toolResult keeps its id and status with ``[erased]``
    content -- so tool pairs stay pairs and the view stays valid.
    """
    out: list[ContentBlock] = []
    for block in content:
        if "toolUse" in block:
            use = block["toolUse"]
            out.append({"toolUse": {"toolUseId": use["toolUseId"], "name": use.get("name", "tool"), "input": {}}})
        elif "toolResult" in block:
            result = block["toolResult"]
            erased: dict[str, Any] = {"toolUseId": result["toolUseId"], "content": [{"text": ERASED_TEXT}]}
            if "status" in result:
                erased["status"] = result["status"]
            out.append({"toolResult": erased})
        else:
            out.append({"text": ERASED_TEXT})
    return out or [{"text": ERASED_TEXT}]


def summaries_covering(summaries: Sequence[SummaryEntry], entry_id: str) -> list[SummaryEntry]:
    """Every summary that replaced ``entry_id``, directly or through a summary it superseded."""
    covered = {entry_id}
    out: list[SummaryEntry] = []
    changed = True
    while changed:
        changed = False
        for summary in summaries:
            if summary.summary_id not in covered and covered & set(summary.replaces):
                covered.add(summary.summary_id)
                out.append(summary)
                changed = True
    return out
