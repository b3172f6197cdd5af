"""Backend fixtures for the test suite, one plugin per backend family, and the server launchers.

The launchers (``postgres_server``, ``redis_server``) are also used by the benchmarks,
which may run without pytest: nothing here imports it at module level.
"""

from __future__ import annotations

import os
from typing import NoReturn


def in_ci() -> bool:
    """Whether the suite runs under CI, where a backend that cannot start is a failure."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def unavailable(reason: str) -> NoReturn:
    """Fail under CI, skip elsewhere: a missing backend is never silently ignored in CI."""
    import pytest

    if in_ci():
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)
