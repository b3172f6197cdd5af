"""The browser-side guard rails of every page: a strict Content-Security-Policy and friends.

Escaping is done by construction (autoescaping templates, data handed to scripts as
JSON in a ``<script type="application/json">`` block, scripts that only ever set
``textContent``); the policy is the second wall. It allows no inline script, no
``eval``, no plugin, no frame, no form or fetch to another origin:

* the served pages load their scripts and stylesheets from ``/static`` (``'self'``);
* the self-contained file of ``contextledger timeline`` inlines them, so its policy
  (a ``<meta http-equiv>``) names each inline script and stylesheet by its SHA-256.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable

__all__ = ["SERVED_HEADERS", "digest", "file_policy", "served_policy"]


def served_policy() -> str:
    """The policy of every response of ``contextledger serve``."""
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        )
    )


SERVED_HEADERS: dict[str, str] = {
    "Content-Security-Policy": served_policy(),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
"""Headers sent with every response of the web app."""


def digest(source: str) -> str:
    """The CSP source expression (``'sha256-…'``) allowing exactly this inline script or style text."""
    value = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return f"'sha256-{value}'"


def file_policy(scripts: Iterable[str], styles: Iterable[str]) -> str:
    """The policy of a self-contained file whose only scripts and styles are the inline texts given.

    ``frame-ancestors`` and reporting cannot be set from a ``<meta>`` element; the rest
    matches :func:`served_policy`, with hashes where the served pages say ``'self'``.
    """
    return "; ".join(
        (
            "default-src 'none'",
            "script-src " + " ".join(digest(s) for s in scripts),
            "style-src " + " ".join(digest(s) for s in styles),
            "img-src data:",
            "connect-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        )
    )
