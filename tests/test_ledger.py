"""The ``Ledger`` entry point: opening URLs and validating query arguments."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from contextledger import Ledger, Message, ReductionPlan
from contextledger.errors import ConfigurationError
from contextledger.records import utcnow
from contextledger.stores.base import LedgerStore


def test_eviction_query_arguments_are_checked(memory_store: LedgerStore) -> None:
    ledger = Ledger(memory_store)
    conversation = ledger.conversation("s")
    conversation.append(Message.user("a"), Message.user("b"), Message.user("c"))
    conversation.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="per_turn")
    time.sleep(0.01)
    cut = utcnow()
    time.sleep(0.01)
    conversation.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0],)), trigger="per_turn")
    assert len(ledger.evictions("s", trigger="per_turn")) == 2
    # A typo in the trigger is an error, not an empty answer.
    with pytest.raises(ConfigurationError, match="unknown trigger 'per-turn'"):
        ledger.evictions("s", trigger="per-turn")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="since must be a datetime"):
        ledger.evictions("s", since="2h")  # type: ignore[arg-type]
    # A naive datetime means UTC.
    naive: datetime = cut.replace(tzinfo=None)
    assert [e.entry_id for e in ledger.evictions("s", since=naive)] == [
        e.entry_id for e in ledger.evictions("s", since=cut)
    ]
    assert len(ledger.evictions("s", since=naive)) == 1


@pytest.mark.parametrize("url", ["memory://", "sqlite:///{tmp}/options.db"])
def test_an_option_the_backend_does_not_take_is_a_configuration_error(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigurationError, match="unsupported option") as info:
        Ledger.connect(url.format(tmp=tmp_path), no_such_option=1)
    assert "no_such_option" in str(info.value)


def test_a_url_given_to_the_constructor_points_to_connect() -> None:
    with pytest.raises(ConfigurationError, match=r"Ledger.connect\('sqlite:///agents.db'\)"):
        Ledger("sqlite:///agents.db")  # type: ignore[arg-type]
