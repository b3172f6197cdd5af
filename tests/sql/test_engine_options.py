"""The SQL engine options are declared once (EngineOptions) and read the same by from_url and build_engine."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.defaults import DEFAULT_BUSY_TIMEOUT, EngineOptions
from contextledger.stores.sql.engine import build_engine


def test_known_names_are_fields_and_the_rest_goes_to_create_engine() -> None:
    options = EngineOptions.of({"pool_size": 3, "busy_timeout": 2.0, "isolation_level": "SERIALIZABLE"})
    assert (options.pool_size, options.busy_timeout) == (3, 2.0)
    assert options.extra == {"isolation_level": "SERIALIZABLE"}
    assert options.pools == {"pool_size": 3}
    assert EngineOptions.of({}) == EngineOptions()
    assert EngineOptions().busy_timeout == DEFAULT_BUSY_TIMEOUT


@pytest.mark.parametrize(
    ("options", "serves"),
    [
        ({}, True),
        ({"busy_timeout": 1.0, "read_only": True, "lock_timeout": None}, True),
        ({"echo": False, "pool_pre_ping": False}, True),
        ({"echo": True}, False),
        ({"connect_args": {}}, False),
        ({"pool_size": 2}, False),
        ({"isolation_level": "SERIALIZABLE"}, False),
    ],
)
def test_only_the_options_the_reader_honours_keep_the_reader(options: dict[str, Any], serves: bool) -> None:
    assert EngineOptions.of(options).reader_serves is serves


def test_neither_signature_repeats_the_options() -> None:
    for function in (build_engine, SQLStore.from_url):
        named = set(inspect.signature(function).parameters) - {"url", "cls", "auto_upgrade", "options"}
        assert named == set(), f"{function.__qualname__} declares {named} again"
