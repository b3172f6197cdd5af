"""The id grammar: what a session, agent, entry or reduction id may be when it comes from a file.

Ids are shown as they are -- in the CLI's tables, the web view's pages and links, log
lines -- so an id read from an export (``contextledger import``) must be plain text:

* 1 to :data:`~contextledger.model.jsonvalues.MAX_ID_LENGTH` (255) characters, the width of
  the SQL columns and the same bound on every backend;
* no control or format character (Unicode categories Cc, Cf and Cs -- NUL, newlines,
  escape sequences, bidirectional overrides, lone surrogates), and no line or paragraph
  separator;
* none of the markup characters ``<`` ``>`` ``&`` ``"`` ``'`` and the backtick;
* no whitespace at either end.

Letters and digits of any script, spaces inside, and every other punctuation
(``-_.:/@#+=~!?%$*()[]{}|,;``) are allowed: the ids the library and its hosts make
(hex and dashed UUIDs, ``repair-...``, ``msg_...``, ``user@example.com``) all fit.

Names recorded with a reduction or revision (a strategy, a summarizer, a pin source)
follow :func:`name_problem`: the same bound and no control characters, markup allowed.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections import deque
from time import time_ns

from contextledger.model.jsonvalues import MAX_ID_LENGTH

__all__ = [
    "MARKUP",
    "MAX_ID_LENGTH",
    "id_problem",
    "is_time_ordered",
    "name_problem",
    "random_uuid_hex",
    "time_ordered_uuid",
    "time_ordered_uuid_hex",
]

MARKUP = frozenset("<>&\"'`")
"""Characters an id may not hold: they mean something in HTML, a shell or Markdown."""

_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _control(value: str) -> str | None:
    """The first control, format, surrogate or separator character of ``value``, if any."""
    if value.isascii() and value.isprintable():
        return None
    for char in value:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            return char
    return None


def id_problem(value: object, *, max_length: int = MAX_ID_LENGTH) -> str | None:
    """What is wrong with ``value`` as an id (see the module docstring), or ``None`` when it is one.

    The answer reads after the id's name: ``"message_id " + problem``.
    """
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if not value:
        return "is empty"
    if len(value) > max_length:
        return f"is {len(value):,} characters long (at most {max_length})"
    char = _control(value)
    if char is not None:
        return f"holds the control character U+{ord(char):04X} (ids are plain text)"
    markup = MARKUP.intersection(value)
    if markup:
        shown = " ".join(sorted(markup))
        return f"holds {shown} (ids may not hold the markup characters < > & \" ' `)"
    if value != value.strip():
        return "starts or ends with whitespace"
    return None


def name_problem(value: object, *, max_length: int = MAX_ID_LENGTH) -> str | None:
    """What is wrong with ``value`` as a recorded name (strategy, summarizer, pin source), or ``None``.

    At most ``max_length`` characters, none of them a control character.
    """
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if len(value) > max_length:
        return f"is {len(value):,} characters long (at most {max_length})"
    char = _control(value)
    if char is not None:
        return f"holds the control character U+{ord(char):04X}"
    return None


_DRAWN = 128  # ids made from one os.urandom call
# Ids made ahead from one read of os.urandom: a read costs about as much as the rest of
# making an id, and every commit makes one. A deque's popleft is atomic, so threads
# never share one; a forked child drops the parent's (os.register_at_fork below), so two
# processes never hand out the same id.
_READY: deque[str] = deque()


# The version and variant bits set by a byte translation (in C, not a loop per id):
# byte b becomes b & 0x0F | 0x40 (version 4), resp. b & 0x3F | 0x80 (RFC 4122 variant).
_VERSION_4 = bytes([b & 0x0F | 0x40 for b in range(256)])
_VARIANT = bytes([b & 0x3F | 0x80 for b in range(256)])


def _draw() -> None:
    """Make :data:`_DRAWN` more ids from one read of ``os.urandom``."""
    raw = bytearray(os.urandom(16 * _DRAWN))
    raw[6::16] = raw[6::16].translate(_VERSION_4)
    raw[8::16] = raw[8::16].translate(_VARIANT)
    text = raw.hex()
    _READY.extend([text[i : i + 32] for i in range(0, 32 * _DRAWN, 32)])


if hasattr(os, "register_at_fork"):  # pragma: no branch - every POSIX platform has it
    os.register_at_fork(after_in_child=_READY.clear)


def random_uuid_hex() -> str:
    """A random UUID (version 4) as 32 lowercase hex digits: what ``uuid.uuid4().hex`` returns.

    Built from 16 bytes of ``os.urandom`` with the version and variant bits set as
    :func:`uuid.uuid4` sets them, without making a ``UUID`` object; the bytes of
    :data:`_DRAWN` ids are read at once (every commit makes one), and an id is handed out
    once, in one process only.
    """
    while True:
        try:
            return _READY.popleft()
        except IndexError:  # none left (or another thread took the last ones): draw more
            _draw()


def time_ordered_uuid_hex() -> str:
    """A time-ordered UUID (version 7, RFC 9562) as 32 lowercase hex digits: a new summary's or reduction's id.

    Its first 48 bits are the Unix time in milliseconds; the other 74, beside the version
    and variant, are random (from :func:`random_uuid_hex`'s draw). So ids made later sort
    after ids made earlier, to the millisecond, and an index on a conversation's ids grows
    at its end: a commit writes the index's last page, where random ids would each land on
    a page of their own anywhere in it (on SQLite, a WAL frame each, and pages read back
    once the index outgrows the cache). Ids made within one millisecond are in random order
    among themselves; an id is unique as a random one is (74 random bits a millisecond).
    The first characters are the time, so :func:`~contextledger.model.text.short` shows
    such an id by its last ones.
    """
    h = random_uuid_hex()
    # h[12] is the version-4 digit, replaced by 7; h[16] already carries the RFC 4122 variant.
    return f"{time_ns() // 1_000_000:012x}7{h[13:]}"


def time_ordered_uuid() -> str:
    """:func:`time_ordered_uuid_hex` in the canonical dashed form: a new message's id."""
    h = time_ordered_uuid_hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_time_ordered(value: str) -> bool:
    """Whether ``value`` is a :func:`time_ordered_uuid` or a :func:`time_ordered_uuid_hex` (lowercase)."""
    return _TIME_ORDERED.fullmatch(value) is not None


_TIME_ORDERED = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}"
)
