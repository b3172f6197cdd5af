"""Summarizers: callables that turn a list of messages into summary text.

A summarizer is any ``Callable[[list[Message]], str]`` (under the async API it may also
be a coroutine function). The ledger records its name
(:func:`summarizer_name`) on every summary it makes. :class:`ExtractiveSummarizer` is
deterministic and needs no model, so the summarizing manager works offline by default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from contextledger.messages import Message
from contextledger.seam import settle

__all__ = ["SUMMARY_MARK", "ExtractiveSummarizer", "Summarizer", "is_summary", "summarizer_name"]

Summarizer = Callable[[list[Message]], str | Awaitable[str]]
"""Turns the messages being replaced into the summary text."""

SUMMARY_MARK = "summary_of"
"""Key under ``metadata["custom"]["contextledger"]`` marking a message that renders an earlier summary."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_SPACES = re.compile(r"\s+")


def is_summary(message: Message) -> bool:
    """Whether ``message`` is an earlier summary handed to a summarizer (see :data:`SUMMARY_MARK`)."""
    custom = message.metadata.get("custom")
    ledger = custom.get("contextledger") if isinstance(custom, Mapping) else None
    return isinstance(ledger, Mapping) and SUMMARY_MARK in ledger


def summarizer_name(summarizer: Summarizer) -> str:
    """The name recorded for ``summarizer``: its ``name`` attribute, function name or class name."""
    name = getattr(summarizer, "name", None)
    if isinstance(name, str) and name:
        return name
    name = getattr(summarizer, "__name__", None)
    if isinstance(name, str) and name and name != "<lambda>":
        return name
    kind = type(summarizer).__name__
    return "custom" if kind in ("function", "method", "partial") else kind


class ExtractiveSummarizer:
    """A deterministic, offline summary: the first sentence of each message, tool calls and results.

    Each message becomes one line (``- user: ...``); tool calls are shown as
    ``name(input)`` and results as ``name -> status: first sentence``. An earlier
    summary (:func:`is_summary`) keeps its own lines, so a chain of summaries loses
    the oldest facts last. The output never
    exceeds ``max_chars`` characters: lines that do not fit are counted in a final
    ``(N more messages omitted)`` line.

    Args:
        max_chars: Upper bound of the summary length (>= 200).
        sentence_chars: Upper bound of each extracted sentence (>= 20).

    Raises:
        ValueError: A bound is too small.
    """

    name = "extractive"

    def __init__(self, max_chars: int = 2000, sentence_chars: int = 160) -> None:
        """Validate and keep the bounds."""
        if max_chars < 200 or sentence_chars < 20:
            raise ValueError("max_chars must be >= 200 and sentence_chars >= 20")
        self.max_chars = max_chars
        self.sentence_chars = sentence_chars

    def __call__(self, messages: list[Message]) -> str:
        """Summarize ``messages`` (in order)."""
        tool_names: dict[str, str] = {}
        lines = [line for m in messages for line in self._lines(m, tool_names)]
        header = f"Summary of {len(messages)} earlier message(s):"
        out = [header]
        used = len(header)
        for index, line in enumerate(lines):
            rest = len(lines) - index
            # Reserve room for the omission line whenever more lines follow.
            reserve = len(f"\n- ... ({rest} more lines omitted)") if rest > 1 else 0
            if used + 1 + len(line) + reserve > self.max_chars:
                out.append(f"- ... ({rest} more lines omitted)")
                break
            out.append(line)
            used += 1 + len(line)
        return "\n".join(out)[: self.max_chars]

    def _lines(self, message: Message, tool_names: dict[str, str]) -> list[str]:
        if is_summary(message):
            body = [ln for ln in message.plain_text.splitlines() if ln.startswith("- ")]
            if body:
                return body
        parts = [p for p in (self._block(b, tool_names) for b in message.content) if p]
        return [f"- {message.role}: " + ("; ".join(parts) if parts else "(no text)")]

    def _block(self, block: Mapping[str, Any], tool_names: dict[str, str]) -> str:
        if isinstance(block.get("text"), str):
            return self._sentence(block["text"])
        if "toolUse" in block:
            use = block["toolUse"]
            name = str(use.get("name", "tool"))
            tool_names[str(use.get("toolUseId"))] = name
            args = json.dumps(use.get("input"), default=str, ensure_ascii=False, sort_keys=True)
            return f"called {name}({self._clip(args, 60)})"
        if "toolResult" in block:
            result = block["toolResult"]
            name = tool_names.get(str(result.get("toolUseId")), "tool")
            inner = [self._block(b, tool_names) for b in result.get("content", [])]
            text = " ".join(p for p in inner if p)
            return f"{name} -> {result.get('status', 'success')}: {self._clip(text, self.sentence_chars)}"
        if "json" in block:
            return self._clip(json.dumps(block["json"], default=str, ensure_ascii=False, sort_keys=True), 60)
        kinds = [k for k in block if k not in ("cachePoint", "reasoningContent")]
        return f"[{kinds[0]}]" if kinds else ""

    def _sentence(self, text: str) -> str:
        text = _SPACES.sub(" ", text).strip()
        first = _SENTENCE_END.split(text, maxsplit=1)[0]
        return self._clip(first, self.sentence_chars)

    @staticmethod
    def _clip(text: str, limit: int) -> str:
        return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize_texts(summarizer: Summarizer, messages: Sequence[Message]) -> str:
    """Call ``summarizer`` on a copy of ``messages`` (so it cannot alter the view).

    Under the async API a coroutine summarizer is awaited here (see :mod:`contextledger.seam`).

    Raises:
        ConfigurationError: The summarizer returned an awaitable outside the async API.
    """
    text: str = settle(summarizer([m.model_copy(deep=True) for m in messages]))
    return text
