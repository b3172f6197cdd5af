"""What the model received, side by side with what the ledger says it received.

Shared by the host conformance suites (:mod:`contextledger.testing.strands`,
:mod:`contextledger.testing.openai_agents`) and the property tests: each host's scripted
model records the input of every call; these helpers put a ledger view in the same
shape, so ``view_at(model_call=N)`` can be compared with call ``N`` as the model got it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from contextledger.model.records import ViewEntry

__all__ = ["as_received", "strands_input"]


def as_received(value: Any) -> Any:
    """``value`` as the scripted models record it: through JSON, anything else as its ``str``."""
    return json.loads(json.dumps(value, default=str))


def strands_input(entries: Iterable[ViewEntry] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The role and content of each message, as a Strands model is given them (and records them).

    Accepts view entries (what the ledger says) or Strands message dicts (what the
    model got); ids, pins and usage metadata are not part of a model's input.
    """
    out: list[dict[str, Any]] = []
    for item in entries:
        if isinstance(item, ViewEntry):
            out.append({"role": item.message.role, "content": item.message.to_strands()["content"]})
        else:
            out.append({"role": item["role"], "content": item["content"]})
    return as_received(out)  # type: ignore[no-any-return]
