"""Fixtures for the Pydantic AI tests: a ledger URL on every backend (the async API opens it)."""

from __future__ import annotations

from tests.aio.conftest import backend_url

__all__ = ["backend_url"]
