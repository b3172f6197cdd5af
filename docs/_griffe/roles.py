"""Render the docstrings' reST roles as cross-references in the API reference.

The docstrings name other objects the Sphinx way (``:class:`~contextledger.Ledger```),
which Markdown would print as it is. Each role becomes an optional cross-reference:
a link when the object is documented on the site, its name in code otherwise. A
relative name (``:meth:`close```) is resolved in the scope of the object whose
docstring holds it. A reST literal-block marker (a paragraph ending in ``::``) becomes
a colon; the indented block after it is already a Markdown code block.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|const):`(?P<tilde>~?)(?P<target>[^`]+)`")
LITERAL_MARKER = re.compile(r"(?<=\S)::$", re.MULTILINE)


class ReSTRoles(griffe.Extension):
    """Rewrite the roles of every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring, if it has one."""
        if obj.docstring is None:
            return
        value = ROLE.sub(lambda match: _reference(obj, match), obj.docstring.value)
        obj.docstring.value = LITERAL_MARKER.sub(":", value)


def _reference(obj: griffe.Object, match: re.Match[str]) -> str:
    target = match["target"].removesuffix("()")
    title = target.rsplit(".", 1)[-1] if match["tilde"] else target
    identifier = _resolve(obj, target)
    return f'<autoref identifier="{escape(identifier)}" optional><code>{escape(title)}</code></autoref>'


def _resolve(obj: griffe.Object, target: str) -> str:
    if target.startswith("contextledger."):
        return target
    head, _, rest = target.partition(".")
    try:
        resolved = obj.resolve(head)
    except griffe.NameResolutionError:
        return target
    return f"{resolved}.{rest}" if rest else resolved
