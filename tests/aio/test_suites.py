"""The sync suites, run unchanged on the async API on every backend (see tests/aio/portal.py).

* the store contract, on each store with every call handed to the async API's runner;
* the property tests, with every conversation an ``AsyncConversation``;
* the restart tests of ``tests/test_conversation.py``, the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import tests.test_conversation as restart_tests
import tests.test_properties as property_tests
from contextledger.stores.capabilities import CompleteStore
from contextledger.testing import StoreContract
from tests.aio.portal import BlockingConversation, BlockingStore, Portal, async_opener
from tests.conftest import STORE_BACKENDS
from tests.plugins.faults import LossyStore, lossy_backend
from tests.soak import examples


@pytest.fixture
def opener(portal: Portal, monkeypatch: pytest.MonkeyPatch) -> Callable[..., BlockingConversation]:
    """Every ``Conversation(...)`` the borrowed suites open becomes an AsyncConversation."""
    open_conversation = async_opener(portal)
    monkeypatch.setattr(property_tests, "Conversation", open_conversation)
    monkeypatch.setattr(restart_tests, "Conversation", open_conversation)
    return open_conversation


class TestStoreContractOnAsyncDrivers(StoreContract):
    """The store contract, every call a coroutine of the async API."""

    @pytest.fixture
    def store(self, async_store: BlockingStore) -> BlockingStore:
        return async_store


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=property_tests.manager_specs, script=property_tests.scripts_of(1, 4))
def test_random_conversations_on_the_async_api(
    async_store: BlockingStore, opener: Any, spec: tuple[str, dict[str, Any]], script: list[tuple[Any, ...]]
) -> None:
    property_tests.run_script(async_store, spec, script)


RESTART_TESTS = [
    restart_tests.test_model_call_count_is_persisted_and_restored,
    restart_tests.test_the_count_rides_in_the_reduction_commit,
    restart_tests.test_restore_returns_exactly_the_live_view,
    restart_tests.test_a_crash_mid_tool_is_repaired_on_restore,
]


@pytest.mark.parametrize("restart_test", RESTART_TESTS, ids=lambda t: t.__name__.removeprefix("test_"))
def test_restarts_on_the_async_api(async_store: BlockingStore, opener: Any, restart_test: Callable[..., None]) -> None:
    restart_test(async_store)


@pytest.fixture(params=STORE_BACKENDS)
def lost_reply(request: pytest.FixtureRequest, portal: Portal) -> Iterator[LossyStore]:
    """A lossy store of each backend (tests/plugins/faults.py), every call handed to the async API's runner."""

    def open_store(url: str, **options: Any) -> CompleteStore:
        return BlockingStore.open(portal, url, **options)

    def wrap(store: CompleteStore) -> CompleteStore:
        return BlockingStore(portal, store)

    with lossy_backend(request, request.param, open_store, wrap) as lossy:
        yield lossy
