"""Ledger.NEEDS is exact enough: each feature runs on a store declaring only what NEEDS lists for it.

A store of every capability is narrowed (its ``capabilities`` declaration) to one feature's
list; the feature must work. Had a history module reached for a capability NEEDS does not
list, its own check would raise CapabilityMissing here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.core.changeset import ReductionPlan
from contextledger.ledger import NEEDS
from contextledger.stores.capabilities import capabilities_of
from contextledger.stores.memory import MemoryStore


class Narrowed:
    """A memory store that declares only ``names``."""

    def __init__(self, inner: MemoryStore, names: frozenset[str]) -> None:
        self.inner = inner
        self.capabilities = names

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _seeded() -> tuple[MemoryStore, str]:
    store = MemoryStore()
    conv = Ledger(store).conversation("s", app="app", user="u")
    conv.append(Message.user("hello"), Message.assistant("hi"))
    conv.before_model_call()
    conv.append(Message.user("more"), Message.assistant("yes"))
    conv.apply_plan(lambda v: ReductionPlan(strategy="w", evict=(v.ids[0], v.ids[1])), trigger="manual")
    return store, conv.view[0].entry_id


FEATURES: dict[str, Callable[[Ledger, str], object]] = {
    "view_at": lambda ledger, _: ledger.view_at("s", model_call=1),
    "fork": lambda ledger, _: ledger.fork("s", "forked"),
    "forks": lambda ledger, _: ledger.forks("s"),
    "erase": lambda ledger, entry: ledger.erase("s", entry, reason="asked"),
    "prune": lambda ledger, _: ledger.prune(older_than=timedelta(0)),
    "expire": lambda ledger, _: ledger.expire(idle=timedelta(seconds=1), dry_run=True),
    "export_records": lambda ledger, _: ledger.export_records("s"),
    "import_records": lambda ledger, _: Ledger.connect("memory://").import_records(ledger.export_records("s")[0]),
    "erase_user": lambda ledger, _: ledger.erase_user("app", "u", reason="asked"),
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_each_feature_runs_on_exactly_what_it_needs(feature: str) -> None:
    store, entry = _seeded()
    names = frozenset(c.name for c in NEEDS[feature])
    if feature == "import_records":  # the export is read from a full store, the import needs NEEDS
        target = Ledger(Narrowed(MemoryStore(), names))
        assert target.import_records(Ledger(store).export_records("s")[0]) == "imported"
        return
    narrowed = Narrowed(store, names)
    assert capabilities_of(narrowed) == names
    FEATURES[feature](Ledger(narrowed), entry)


def test_copy_to_runs_on_what_it_needs_on_either_side() -> None:
    store, _ = _seeded()
    source = Ledger(Narrowed(store, frozenset(c.name for c in NEEDS["copy_to"])))
    target = Ledger(Narrowed(MemoryStore(), frozenset(c.name for c in NEEDS["copy_to target"])))
    report = source.copy_to(target, ["s"])
    assert report.count("imported") == 1
    assert target.store.load("s", "default") == store.load("s", "default")


def test_every_need_is_exercised() -> None:
    assert set(NEEDS) == set(FEATURES) | {"copy_to", "copy_to target"}
