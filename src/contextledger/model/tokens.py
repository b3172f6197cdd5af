"""Token estimation: a protocol and a dependency-free default."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from contextledger.errors import ConfigurationError
from contextledger.model.jsontext import lenient_text
from contextledger.model.messages import Message

__all__ = ["CharTokenCounter", "TokenCounter", "projected_input_tokens"]


@runtime_checkable
class TokenCounter(Protocol):
    """Estimates how many tokens a message costs in the model's input."""

    def count(self, message: Message) -> int:
        """Return the estimated token count of ``message`` (>= 0)."""
        ...


class CharTokenCounter:
    """Roughly four characters a token, plus a fixed cost per message and per media block.

    Good enough to decide when to compress; swap in a tokenizer-backed counter for
    exact budgets.
    """

    def __init__(self, chars_per_token: float = 4.0, per_message: int = 4, per_media: int = 1000) -> None:
        """Configure the estimate.

        Raises:
            ConfigurationError: ``chars_per_token`` is not positive, or ``per_message`` or
                ``per_media`` is negative (a count is never below zero).
        """
        if not chars_per_token > 0:
            raise ConfigurationError(f"chars_per_token must be positive, got {chars_per_token!r}")
        for name, value in (("per_message", per_message), ("per_media", per_media)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, got {value!r}")
        self.chars_per_token = chars_per_token
        self.per_message = per_message
        self.per_media = per_media

    def count(self, message: Message) -> int:
        """Estimate ``message``'s tokens."""
        return self.counts((message,))[0]

    def counts(self, messages: Sequence[Message]) -> list[int]:
        """``[self.count(m) for m in messages]``, in one call: an append counts its whole turn at once.

        The one source of the estimate (:meth:`count` is this for one message). A subclass
        overriding :meth:`count` alone is not read here; the conversation layer calls this
        only on a :class:`CharTokenCounter` itself.
        """
        per_message, per_token = self.per_message, self.chars_per_token
        found: list[int] = []
        add = found.append
        for message in messages:
            content = message.content
            if len(content) == 1:
                # One block, the shape of nearly every message (a text, a tool call, a tool
                # result with one text): measured here as _measure measures it, without its walk.
                block = content[0]
                text = block.get("text")
                if type(text) is str:
                    add(per_message + _ceil(len(text) / per_token))
                    continue
                if text is None and "toolUse" in block:
                    tool = block["toolUse"]
                    add(
                        per_message
                        + _ceil((len(str(tool.get("name", ""))) + len(_json_text(tool.get("input")))) / per_token)
                    )
                    continue
                if text is None and "toolResult" in block and len(inner := block["toolResult"].get("content", [])) == 1:
                    text = inner[0].get("text")
                    if type(text) is str:
                        add(per_message + _ceil(len(text) / per_token))
                        continue
            chars, media = _measure(content)
            add(per_message + media * self.per_media + _ceil(chars / per_token))
        return found


_ceil = math.ceil

# What json.dumps(value, default=str) writes, built once (json.dumps builds an encoder per
# call when given an option, which cost more than the encoding of a small tool input).
_ENCODER = json.JSONEncoder(default=str)


def _measure(blocks: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    chars = media = 0
    for block in blocks:
        text = block.get("text")  # the common block first, looked up once
        if isinstance(text, str):
            chars += len(text)
        elif "toolUse" in block:
            tool = block["toolUse"]
            chars += len(str(tool.get("name", ""))) + len(_json_text(tool.get("input")))
        elif "toolResult" in block:
            c, m = _measure(block["toolResult"].get("content", []))
            chars += c
            media += m
        elif "json" in block:
            chars += len(_json_text(block["json"]))
        elif any(k in block for k in ("image", "document", "video", "audio")):
            media += 1
        elif "reasoningContent" in block:
            text = block["reasoningContent"].get("reasoningText", {}).get("text", "")
            chars += len(text) if isinstance(text, str) else 0
    return chars, media


def _json_text(value: Any) -> str:
    """``json.dumps(value, default=str)``: by the prebuilt encoder when it can (see :mod:`.jsontext`)."""
    text = lenient_text(value)
    return _ENCODER.encode(value) if text is None else text


def projected_input_tokens(messages: Sequence[Message], tokens: Sequence[int]) -> int:
    """Last reported input+output usage plus the estimate of every message after it.

    Args:
        messages: The active view's messages, in order.
        tokens: The per-message estimates, aligned with ``messages``.
    """
    for index in range(len(messages) - 1, -1, -1):
        usage = messages[index].usage
        if usage and isinstance(usage.get("inputTokens"), int):
            reported = int(usage["inputTokens"]) + int(usage.get("outputTokens") or 0)
            return reported + sum(tokens[index + 1 :])
    return sum(tokens)
