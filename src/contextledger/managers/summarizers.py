"""Summarizers: callables that turn a list of messages into summary text.

A summarizer is any ``Callable[[list[Message]], str]`` (under the async API it may also
be a coroutine function). The ledger records its name (:func:`summarizer_name`) on
every summary it makes. The summarizing manager hands it copies of the entries being
replaced, in order: an earlier summary among them is marked (:func:`is_summary`) and
carries what it covered, and each message carries where it stands in the conversation
(see :mod:`contextledger.managers.coverage`), so ``coverage_of(messages).header()``
says truthfully what the new summary covers, whoever writes the rest of the text.

:class:`ExtractiveSummarizer` is deterministic and needs no model, so the summarizing
manager works offline by default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextledger.core.seam import settle
from contextledger.managers.coverage import SUMMARY_MARK, coverage_of, is_summary, stamp_of
from contextledger.model.messages import Message

__all__ = [
    "SUMMARY_MARK",
    "ExtractiveSummarizer",
    "Summarizer",
    "coverage_of",
    "is_summary",
    "summarize_texts",
    "summarizer_name",
]

Summarizer = Callable[[list[Message]], str | Awaitable[str]]
"""Turns the messages being replaced into the summary text."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_SPACES = re.compile(r"\s+")
PIN_NOTE = " (beside a pinned message)"
"""Marks the line of a message that sat right beside a pinned one (kept first when space is short)."""
# A fact line: "- turn 12, assistant (beside a pinned message): ..." (turn and note optional).
_LINE = re.compile(r"^- (?:turn (?P<turn>\d[\d,]*), )?[a-z ]+?(?P<pin> \(beside a pinned message\))?: ")
# What an earlier summary dropped: this format, and the one before it ("(N more lines omitted)").
_DROPPED = re.compile(
    r"^- \.\.\. (?:(?P<n>\d[\d,]*) lines? dropped(?: \(turns? (?P<a>\d[\d,]*)(?:-(?P<b>\d[\d,]*))?\))?"
    r"|\((?P<old>\d[\d,]*) more lines omitted\))"
)


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


@dataclass(frozen=True)
class _Line:
    """One fact of the summary: its text, the turn it belongs to, whether it sat beside a pin."""

    text: str
    turn: int | None
    near_pin: bool


@dataclass
class _Dropped:
    """Lines left out (earlier summaries' and this one's) and the turns they came from."""

    count: int = 0
    first: int | None = None
    last: int | None = None
    at: int | None = None
    """The line before which an earlier summary's dropped line stood."""

    def add(self, count: int, turns: Iterable[int | None]) -> None:
        known = [t for t in turns if t is not None]
        self.count += count
        if known:
            self.first = min([*known, *([self.first] if self.first is not None else [])])
            self.last = max([*known, *([self.last] if self.last is not None else [])])

    def line(self) -> str:
        text = f"- ... {self.count:,} line{'' if self.count == 1 else 's'} dropped"
        if self.first is not None and self.last is not None:
            text += f" (turn {self.first:,})" if self.first == self.last else f" (turns {self.first:,}-{self.last:,})"
        return text


class ExtractiveSummarizer:
    """A deterministic, offline summary: a header, then one line per message, the newest kept first.

    The header (:meth:`Coverage.header <contextledger.managers.coverage.Coverage.header>`)
    states what the summary covers -- messages, user prompts, model calls and the range
    of turns, earlier summaries included. Each message becomes one line
    (``- turn 12, user: ...``): its first sentence, tool calls as ``called name(input)``
    and results as ``name -> status: first sentence``, at most ``sentence_chars``
    characters. A message that sat right beside a pinned one is marked
    ``(beside a pinned message)``. An earlier summary brings its own lines, so what it
    kept is carried forward.

    The output never exceeds ``max_chars``. When the lines do not all fit, they are
    chosen in this order while they fit: the newest line, the lines beside a pinned
    message (newest first), then the rest newest first, stopping at the first that does
    not fit; they are shown in conversation order, and one ``- ... N lines dropped
    (turns a-b)`` line says what was left out, including what earlier summaries had
    dropped. The newest line is always kept when ``max_chars`` leaves room for the
    header, that line and the dropped line.

    Args:
        max_chars: Upper bound of the summary length (>= 200).
        sentence_chars: Upper bound of each line's extracted text (>= 20).

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
        header = coverage_of(messages).header()
        tool_names: dict[str, str] = {}
        dropped = _Dropped()
        lines: list[_Line] = []
        for message in messages:
            if is_summary(message):
                lines.extend(self._carried(message, dropped, len(lines)))
            else:
                lines.append(self._line(message, tool_names))
        return self._fit(header, lines, dropped)

    # -- choosing what fits ----------------------------------------------------------------------

    def _fit(self, header: str, lines: list[_Line], dropped: _Dropped) -> str:
        whole = "\n".join([header, *(line.text for line in lines)])
        if not dropped.count and len(whole) <= self.max_chars:
            return whole
        # Room for the dropped line as long as it can get (everything dropped): what is
        # finally dropped is less, so its line is no longer.
        worst = _Dropped(dropped.count, dropped.first, dropped.last)
        worst.add(len(lines), (line.turn for line in lines))
        room = self.max_chars - len(header) - 1 - len(worst.line())
        newest = len(lines) - 1
        older = range(newest - 1, -1, -1)
        chosen: set[int] = set()
        for index in [newest, *(i for i in older if lines[i].near_pin)] if lines else []:
            cost = len(lines[index].text) + 1
            if cost <= room:
                chosen.add(index)
                room -= cost
        for index in (i for i in older if not lines[i].near_pin):
            cost = len(lines[index].text) + 1
            if cost > room:
                break
            chosen.add(index)
            room -= cost
        left_out = [i for i in range(len(lines)) if i not in chosen]
        dropped.add(len(left_out), (lines[i].turn for i in left_out))
        # The dropped line stands where the first line was left out (by this summary or an earlier one).
        at = min([*left_out[:1], *([dropped.at] if dropped.at is not None else [])], default=0)
        out = [header]
        for index, line in enumerate(lines):
            if index == at:
                out.append(dropped.line())
            if index in chosen:
                out.append(line.text)
        if at >= len(lines):
            out.append(dropped.line())
        return "\n".join(out)[: self.max_chars]

    # -- lines -------------------------------------------------------------------------------------

    def _carried(self, summary: Message, dropped: _Dropped, before: int) -> list[_Line]:
        """The lines of an earlier summary (its header left out, what it dropped counted)."""
        text = summary.plain_text
        body = [ln for ln in text.splitlines() if ln.startswith("- ")]
        if not body:
            # Not one of ours: keep its opening as one line.
            opening = self._clip(_SPACES.sub(" ", text).strip(), self.sentence_chars)
            return [_Line(f"- earlier summary: {opening}", None, False)]
        lines: list[_Line] = []
        for line in body:
            gone = _DROPPED.match(line)
            if gone is not None:
                count = int((gone["n"] or gone["old"]).replace(",", ""))
                first, last = (int(v.replace(",", "")) if v else None for v in (gone["a"], gone["b"] or gone["a"]))
                dropped.add(count, (first, last))
                if dropped.at is None:
                    dropped.at = before + len(lines)
                continue
            fact = _LINE.match(line)
            turn = int(fact["turn"].replace(",", "")) if fact is not None and fact["turn"] else None
            lines.append(_Line(line, turn, fact is not None and fact["pin"] is not None))
        return lines

    def _line(self, message: Message, tool_names: dict[str, str]) -> _Line:
        stamp = stamp_of(message)
        turn = stamp.turn if stamp is not None and stamp.turn else None
        near_pin = stamp is not None and stamp.near_pin
        parts = [p for p in (self._block(b, tool_names) for b in message.content) if p]
        body = self._clip("; ".join(parts) if parts else "(no text)", self.sentence_chars)
        where = f"turn {turn:,}, " if turn is not None else ""
        return _Line(f"- {where}{message.role}{PIN_NOTE if near_pin else ''}: {body}", turn, near_pin)

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
            return f"{name} -> {result.get('status', 'success')}: {text}"
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

    Under the async API a coroutine summarizer is awaited here (see :mod:`contextledger.core.seam`).

    Raises:
        ConfigurationError: The summarizer returned an awaitable outside the async API.
    """
    text: str = settle(summarizer([m.model_copy(deep=True) for m in messages]))
    return text
