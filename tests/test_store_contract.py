"""The store contract on every backend, with a lossy twin of each store for the exactly-once tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextledger.stores.capabilities import CompleteStore
from contextledger.testing import StoreContract
from tests.conftest import STORE_BACKENDS
from tests.plugins.faults import LossyStore, lossy_backend


@pytest.fixture(params=STORE_BACKENDS)
def lost_reply(request: pytest.FixtureRequest) -> Iterator[LossyStore]:
    """A fresh store of each backend whose next commits can lose their reply (see tests/plugins/faults.py)."""
    with lossy_backend(request, request.param) as lossy:
        yield lossy


class TestStoreContract(StoreContract):
    """Runs the contract suite against every backend, and PostgreSQL with its entries table partitioned."""

    @pytest.fixture(params=[*STORE_BACKENDS, "postgres_partitioned"])
    def store(self, request: pytest.FixtureRequest) -> CompleteStore:
        """A fresh, empty store of each backend (``<name>_store`` fixtures of the plugins)."""
        backend: CompleteStore = request.getfixturevalue(f"{request.param}_store")
        return backend


def test_the_contract_without_pytest_names_the_extra() -> None:
    blocked = "import sys; sys.modules['pytest'] = None; import contextledger.testing"
    result = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "pip install 'contextledger[testing]'" in result.stderr
    assert "ImportError" in result.stderr


def test_the_server_launchers_are_not_in_the_package() -> None:
    import contextledger.testing as testing

    names = {path.name for path in Path(testing.__file__).parent.iterdir()}
    assert not names & {"postgres.py", "redis.py"}
