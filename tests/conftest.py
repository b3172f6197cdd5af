"""Shared fixtures: a ``store`` fixture parametrized over every backend, and the Hypothesis setup.

Each backend's fixtures live in a plugin under ``tests/plugins``. Real servers only:
a URL from the environment when set, else testcontainers when a Docker engine answers,
else a throwaway server started from the local binaries on a free loopback port. Under
``CI=true`` a backend that cannot start fails the run instead of skipping.

Hypothesis (see "Testing" in CONTRIBUTING.md): every failure prints the
``@reproduce_failure`` blob, and the ``--hypothesis-seed`` of one that did not reproduce
from it; the example database lives in ``CONTEXTLEDGER_HYPOTHESIS_DB`` (default
``.hypothesis/examples`` at the repository root), so a failing example is tried first by
the next run that keeps that directory (CI caches it). ``CONTEXTLEDGER_HYPOTHESIS_SEED=N
scripts/test`` runs every property from seed ``N`` instead (Hypothesis turns the database
off under a forced seed). The end of a run says which, and after a failure the command
that runs it again. Profiles: ``dev`` (default), ``ci`` (``CI=true``) and ``soak``
(``CONTEXTLEDGER_SOAK=1``: see :mod:`tests.soak`).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.plugins import in_ci
from tests.soak import FACTOR, SOAK

pytest_plugins = ["tests.plugins.sql", "tests.plugins.redis", "tests.plugins.early"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_DB = Path(os.environ.get("CONTEXTLEDGER_HYPOTHESIS_DB") or ROOT / ".hypothesis" / "examples").resolve()
"""Where Hypothesis keeps the examples that failed (or were interesting), replayed first by later runs."""

_database = DirectoryBasedExampleDatabase(str(EXAMPLE_DB))
settings.register_profile("dev", print_blob=True, database=_database)
# CI explores new examples on every run (the seed is printed, so a red run is reproducible)
# and keeps its example database between runs, so a failure found once is tried again first.
settings.register_profile("ci", print_blob=True, database=_database, deadline=None)
settings.register_profile("soak", settings.get_profile("ci" if in_ci() else "dev"), max_examples=100 * FACTOR)
settings.load_profile("soak" if SOAK else "ci" if in_ci() else "dev")

STORE_BACKENDS = ["memory", "sqlite", "postgres", "redis", "redis_cluster"]


def _seed(config: pytest.Config) -> str | None:
    """The seed forced with ``--hypothesis-seed`` (``CONTEXTLEDGER_HYPOTHESIS_SEED`` in ``scripts/test``), if any."""
    seed = config.getoption("--hypothesis-seed", default=None)
    return None if seed is None else str(seed)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left (imported SDKs, test modules, parameters) out of the garbage collector.

    Those hundreds of thousands of objects live for the whole run anyway, but every full
    collection -- the automatic ones, and the ``gc.collect()`` the restart tests call to
    drop an agent -- walked them all again. Objects a test makes are collected as before.
    """
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Freeze, before each test, what the earlier tests left alive (after collecting their garbage).

    What survives a test -- session and module fixtures, caches, imported modules -- lives
    on, and without this every full collection (the automatic ones, and each
    ``gc.collect()`` a restart test calls to drop an agent) walks all of it again: late in
    the run, seconds per collection. A test's own objects are made after the freeze and
    are collected as before; so is any garbage an earlier test left, by this
    ``gc.collect()``. It also re-freezes after a test that ``gc.unfreeze()``-d everything.
    """
    gc.collect()
    gc.freeze()


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say how the properties run: profile, seed, example database, soak factor."""
    return [_settings_line(config)]


def _settings_line(config: pytest.Config) -> str:
    seed = _seed(config)
    mode = f"seed {seed} (example database off)" if seed else f"example database {EXAMPLE_DB}"
    return f"hypothesis: profile {settings.get_current_profile_name()}, {mode}, soak factor {FACTOR}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how the properties ran (``-q`` hides the header) and, after a failure, how to run it again.

    Hypothesis prints, with each failure, the ``@reproduce_failure`` blob (and the
    ``--hypothesis-seed`` of a failure that did not reproduce from it); the example
    database replays a failing example first on the next run that keeps it.
    """
    config = terminalreporter.config
    terminalreporter.write_line(_settings_line(config))
    failed = sorted({report.nodeid for report in terminalreporter.stats.get("failed", [])})
    if not failed:
        return
    seed = _seed(config)
    again = f"CONTEXTLEDGER_HYPOTHESIS_SEED={seed}" if seed else f"CONTEXTLEDGER_HYPOTHESIS_DB={EXAMPLE_DB}"
    terminalreporter.section("reproduce")
    terminalreporter.write_line(f"{again} scripts/test {' '.join(failed[:5])}")
    terminalreporter.write_line(
        "or add the @reproduce_failure(...) line Hypothesis printed with a failure above its test; "
        "a printed --hypothesis-seed=N reruns it as CONTEXTLEDGER_HYPOTHESIS_SEED=N scripts/test"
    )


@pytest.fixture
def memory_store() -> Iterator[CompleteStore]:
    """A fresh in-process store."""
    backend = MemoryStore()
    yield backend
    backend.close()


@pytest.fixture(params=STORE_BACKENDS)
def store(request: pytest.FixtureRequest) -> CompleteStore:
    """A fresh, empty store of each backend (``<name>_store`` fixtures of the plugins)."""
    backend: CompleteStore = request.getfixturevalue(f"{request.param}_store")
    return backend
