"""The Redis store is composed of parts that share one ``RedisData`` and nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

import contextledger.stores.redis as package
from contextledger.stores.capabilities import capabilities_of
from contextledger.stores.memory import MemoryStore
from contextledger.stores.redis import RedisStore

PARTS = ("queries", "writes", "sessions", "lifecycle", "moving", "upgrade")
HERE = Path(package.__file__).parent


def _tree(part: str) -> ast.Module:
    return ast.parse((HERE / f"{part}.py").read_text())


def test_a_part_imports_no_other_part() -> None:
    prefix = "contextledger.stores.redis."
    for part in PARTS:
        imported = {
            node.module.removeprefix(prefix)
            for node in ast.walk(_tree(part))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix)
        }
        assert not imported & {*PARTS, "store"}, (part, imported & {*PARTS, "store"})


def test_a_part_reads_only_the_public_interface_of_the_shared_data() -> None:
    seen = 0
    for part in PARTS:
        for node in ast.walk(_tree(part)):
            # self._d.<name>: the part's RedisData
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "_d"
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "self"
            ):
                seen += 1
                assert not node.attr.startswith("_"), (part, node.attr, node.lineno)
    assert seen > 50  # the parts were read


def test_the_composed_store_declares_every_capability_as_before() -> None:
    everything = {"erasure", "expiry", "history", "lineage", "reseal", "scopes", "sessions", "time_travel", "transfer"}
    assert capabilities_of(MemoryStore("memory://")) == everything
    assert capabilities_of(RedisStore) == everything | {"settle_erasure"}
