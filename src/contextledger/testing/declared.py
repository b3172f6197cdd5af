"""The base of every capability contract: it runs only where the store declares what it needs.

Each contract class names the capabilities its tests need (:attr:`CapabilityContract.needs`:
the one it checks, and those it observes through). A test of a store that does not
declare one of them is skipped, saying which; the required contract
(:class:`~contextledger.testing.required.RequiredContract`) has no needs and always runs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from contextledger.stores.capabilities import Capability

__all__ = ["CapabilityContract", "missing_for"]


def missing_for(store: object, needs: tuple[Capability[Any], ...]) -> list[str]:
    """The names of the capabilities among ``needs`` that ``store`` does not declare."""
    return [capability.name for capability in needs if not capability.held_by(store)]


class CapabilityContract:
    """Skips each test whose contract needs a capability the store under test does not declare.

    The store is the ``store`` fixture's, or the ``lost_reply`` fixture's ``store``.
    """

    needs: ClassVar[tuple[Capability[Any], ...]] = ()

    @pytest.fixture(autouse=True)
    def _declared(self, request: pytest.FixtureRequest) -> None:
        # The class that defines the test says what it needs (a suite mixes many contracts).
        name = request.function.__name__
        owner = next((k for k in type(self).__mro__ if name in vars(k)), type(self))
        needs: tuple[Capability[Any], ...] = vars(owner).get("needs", ())
        if not needs:
            return
        if "store" in request.fixturenames:
            store = request.getfixturevalue("store")
        elif "lost_reply" in request.fixturenames:
            store = request.getfixturevalue("lost_reply").store
        else:
            return
        missing = missing_for(store, needs)
        if missing:
            pytest.skip(f"{type(store).__name__} does not declare {', '.join(missing)} ({owner.__name__})")
