"""The read-only web view of a ledger: ``contextledger serve`` and ``contextledger timeline``.

Needs the ``web`` extra (``pip install 'contextledger[web]'``): Starlette, uvicorn and
Jinja2. Every asset ships in the package; the pages fetch nothing from elsewhere.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    # The app module imports Starlette; ``contextledger.web.render`` alone needs only Jinja2.
    if name == "create_app":
        from contextledger.web.app import create_app

        return create_app
    raise AttributeError(name)
