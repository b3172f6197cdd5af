"""JSON text of a message's frozen content and metadata, written by the C encoder directly.

``json.JSONEncoder.encode`` builds a new C encoder (and a dict of the containers it is
inside, to catch a cycle) on every call; for the four small messages of a turn that
costs as much as the encoding. A message's content and metadata are acyclic by
construction (read-only containers built bottom-up by its validation), so their text is
written here by one encoder built once, without the cycle check. These functions return
``None`` whenever that encoder cannot write the value as it is -- a ``bytes`` value or a
foreign object (``TypeError``), NaN or infinity (``ValueError``), a cycle after all
(``RecursionError``) -- and the caller takes the standard path, which tags bytes and
raises the standard errors: the text, and every error, stay those of ``json.dumps``
with ``allow_nan=False``.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from typing import Any

__all__ = ["frozen_text", "lenient_text"]


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _make(
    item_separator: str, key_separator: str, default: Callable[[Any], Any] = _refuse, allow_nan: bool = False
) -> Callable[[Any, int], Any] | None:
    make = getattr(json.encoder, "c_make_encoder", None)  # None on a Python built without _json
    if make is None:  # pragma: no cover - CPython always has it
        return None
    # markers=None: no cycle check (see the module docstring); indent None, keys unsorted,
    # no key skipped: json.dumps(value, default=default, allow_nan=allow_nan)'s text.
    ascii_text = json.encoder.encode_basestring_ascii
    encoder: Callable[[Any, int], Any] = make(
        None, default, ascii_text, None, key_separator, item_separator, False, False, allow_nan
    )
    return encoder


_SPACED = _make(", ", ": ")
_COMPACT = _make(",", ":")
_LENIENT = _make(", ", ": ", str, True)


def frozen_text(value: Any, *, compact: bool) -> str | None:
    """``json.dumps(value, allow_nan=False)`` (``compact``: without spaces) for an acyclic value, or ``None``.

    ``None`` means the value needs the standard encoder (see the module docstring);
    nothing is raised.
    """
    encoder = _COMPACT if compact else _SPACED
    if encoder is None:  # pragma: no cover - CPython always has it
        return None
    try:
        return "".join(encoder(value, 0))
    except (TypeError, ValueError, RecursionError):
        return None


def lenient_text(value: Any) -> str | None:
    """``json.dumps(value, default=str)`` for an acyclic value (what token counting measures), or ``None``.

    ``None`` when the value holds a cycle after all: the caller takes the standard encoder.
    """
    if _LENIENT is None:  # pragma: no cover - CPython always has it
        return None
    try:
        return "".join(_LENIENT(value, 0))
    except RecursionError:
        return None
