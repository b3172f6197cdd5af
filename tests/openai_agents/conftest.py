"""Fixtures for the OpenAI Agents SDK tests: no tracing export, no network."""

from __future__ import annotations

import pytest
from agents import set_tracing_disabled


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    # The SDK would try to export traces to its hosted backend; these tests stay on loopback.
    set_tracing_disabled(True)
