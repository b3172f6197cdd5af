"""The per-test PostgreSQL databases (:mod:`tests.plugins.postgres_databases`): fresh, never shared, all dropped.

The rest of the suite relies on each test's database being a clone of the template that
no other test touched; these tests hold the clone pool to that, on its own template.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from tests.plugins.postgres_databases import Databases

PREFIX = "cl_pooltest_"


def _url(base: str, database: str) -> str:
    return make_url(base).set(database=database).render_as_string(hide_password=False)


def _left(admin: Engine) -> set[str]:
    with admin.connect() as conn:
        rows = conn.execute(text("SELECT datname FROM pg_database WHERE datname LIKE :like"), {"like": f"{PREFIX}%"})
        return {row[0] for row in rows}


def _rows(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [row[0] for row in conn.execute(text("SELECT note FROM marks ORDER BY note"))]
    finally:
        engine.dispose()


def _write(url: str, note: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO marks (note) VALUES (:note)"), {"note": note})
    finally:
        engine.dispose()


def test_every_clone_is_fresh_and_taken_once_and_all_are_dropped(postgres_admin: Engine, postgres_url: str) -> None:
    databases = Databases(postgres_admin, prefix=PREFIX)
    try:
        template = databases.create()
        engine = create_engine(_url(postgres_url, template))
        try:
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE marks (note text NOT NULL)"))
                conn.execute(text("INSERT INTO marks (note) VALUES ('template')"))
        finally:
            engine.dispose()
        taken: list[str] = []
        for _ in range(5):
            name = databases.take(template, ahead=2)
            assert name not in taken
            taken.append(name)
            url = _url(postgres_url, name)
            # What the template held, and nothing written into the clones taken before it.
            assert _rows(url) == ["template"]
            _write(url, name)
        for name in taken:
            assert _rows(_url(postgres_url, name)) == [name, "template"]
            databases.give_back(name)
        databases.give_back(template)
    finally:
        databases.close()
    # Dropped too: the clones still waiting ahead, which no test took.
    assert _left(postgres_admin) == set()


def test_a_failed_clone_is_raised_by_the_next_take(postgres_admin: Engine) -> None:
    databases = Databases(postgres_admin, prefix=PREFIX)
    try:
        with pytest.raises(RuntimeError, match="cloning test databases failed") as caught:
            databases.take("cl_test_no_such_template")
        assert "cl_test_no_such_template" in str(caught.value.__cause__)
    finally:
        databases.close()


def test_a_held_pool_makes_and_drops_nothing_until_let_go(postgres_admin: Engine) -> None:
    databases = Databases(postgres_admin, prefix=PREFIX)
    try:
        template = databases.create()
        with databases.paused():
            taken = databases.take(template)  # cloned by the caller: the thread is held
            databases.give_back(taken)
            time.sleep(0.5)  # time the thread would need to drop it and clone two ahead
            assert _left(postgres_admin) == {template, taken}
        again = databases.take(template)
        assert again not in {template, taken}
        databases.give_back(again)
        databases.give_back(template)
    finally:
        databases.close()
    assert _left(postgres_admin) == set()
