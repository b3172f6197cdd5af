"""Alembic owns the schema: up, down, models == migrations, out-of-date errors, coexistence."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url

from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.errors import SchemaOutOfDate
from contextledger.stores.sql import VERSION_TABLE, SQLStore, current, downgrade, head, upgrade, upgrade_command
from contextledger.stores.sql.engine import build_engine, parse_url
from contextledger.stores.sql.models import Base
from contextledger.stores.sql.schema import include_object, migrations_dir

LEDGER_TABLES = set(Base.metadata.tables)


def _engine(url: str) -> Engine:
    return build_engine(parse_url(url))


def _tables(url: str) -> set[str]:
    engine = _engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrations_ship_beside_the_code() -> None:
    path = migrations_dir()
    assert (path / "env.py").is_file()
    assert any(p.suffix == ".py" for p in (path / "versions").iterdir())
    assert head() == "0008"


def test_upgrade_from_empty_to_head_and_back(empty_url: str) -> None:
    assert current(empty_url) is None
    assert not _tables(empty_url) & LEDGER_TABLES
    upgrade(empty_url)
    assert current(empty_url) == head()
    assert _tables(empty_url) >= LEDGER_TABLES | {VERSION_TABLE}
    assert "alembic_version" not in _tables(empty_url)
    # The schema works once upgraded.
    store = SQLStore.from_url(empty_url, auto_upgrade=False)
    Conversation(store, "s", "a").append(Message.user("hi"))
    store.close()
    downgrade(empty_url, "base")
    assert current(empty_url) is None
    assert not _tables(empty_url) & LEDGER_TABLES
    upgrade(empty_url)
    assert current(empty_url) == head()


def test_models_and_migrations_agree(empty_url: str) -> None:
    upgrade(empty_url)
    engine = _engine(empty_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "include_object": include_object, "version_table": VERSION_TABLE}
            )
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_models_and_migrations_disagreement_is_detected(empty_url: str) -> None:
    # The comparison above can fail: drop an index the models declare and it is reported.
    upgrade(empty_url)
    engine = _engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP INDEX ix_cl_entries_conversation_id_status_seq"))
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_object": include_object})
            diff = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert [d[0] for d in diff] == ["add_index"]


def test_sqlite_upgrades_itself_by_default(sqlite_url: str) -> None:
    with Ledger.connect(sqlite_url) as ledger:
        ledger.conversation("s").append(Message.user("hi"))
    assert current(sqlite_url) == head()


def test_only_a_real_upgrade_is_logged_at_info(sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="contextledger")
    Ledger.connect(sqlite_url).close()
    assert [r.getMessage() for r in caplog.records if "upgraded ledger schema" in r.getMessage()] != []
    caplog.clear()
    Ledger.connect(sqlite_url).close()  # already at head: every later open is quiet at INFO
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and "schema" in r.getMessage()] == []


def test_postgres_is_not_upgraded_unless_asked(postgres_empty_url: str) -> None:
    with pytest.raises(SchemaOutOfDate) as info:
        Ledger.connect(postgres_empty_url)
    assert info.value.current is None
    assert info.value.expected == head()
    assert current(postgres_empty_url) is None
    with Ledger.connect(postgres_empty_url, auto_upgrade=True) as ledger:
        ledger.conversation("s").append(Message.user("hi"))
    assert current(postgres_empty_url) == head()


def _with_password(url: str) -> tuple[str, str]:
    parsed = make_url(url)
    if parsed.password is None:
        # The throwaway server trusts loopback, so any password is accepted.
        parsed = parsed.set(password="s3cret-pw")
    return parsed.render_as_string(hide_password=False), str(parsed.password)


def test_behind_raises_naming_the_command(empty_url: str) -> None:
    url, password = _with_password(empty_url) if empty_url.startswith("postgres") else (empty_url, "")
    with pytest.raises(SchemaOutOfDate) as info:
        SQLStore.from_url(url, auto_upgrade=False)
    error = info.value
    assert (error.current, error.expected) == (None, head())
    assert error.command.startswith("contextledger db upgrade --url ")
    assert "contextledger db upgrade" in str(error)
    if password:
        assert password not in error.command
        assert password not in str(error)
        assert "***" in error.command
    # Upgraded then downgraded to base is behind again.
    upgrade(url)
    downgrade(url, "base")
    with pytest.raises(SchemaOutOfDate):
        SQLStore.from_url(url, auto_upgrade=False)


def test_ahead_raises_and_is_left_alone(empty_url: str) -> None:
    upgrade(empty_url)
    engine = _engine(empty_url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'f00dfuture'"))
    finally:
        engine.dispose()
    for auto_upgrade in (False, True):
        with pytest.raises(SchemaOutOfDate) as info:
            SQLStore.from_url(empty_url, auto_upgrade=auto_upgrade)
        assert (info.value.current, info.value.expected) == ("f00dfuture", head())
        # db upgrade cannot go back from a newer schema: the advice is a newer library
        assert "upgrade the contextledger package" in str(info.value)
        assert "db upgrade" not in str(info.value)
    with pytest.raises(SchemaOutOfDate):
        upgrade(empty_url)
    with pytest.raises(SchemaOutOfDate):
        downgrade(empty_url, "base")
    assert current(empty_url) == "f00dfuture"
    assert _tables(empty_url) >= LEDGER_TABLES


def test_command_masks_the_password() -> None:
    command_line = upgrade_command("postgresql://alice:hunter2@db.example:5433/app")
    assert command_line == "contextledger db upgrade --url postgresql+psycopg://alice:***@db.example:5433/app"


_APP_ENV = """
from alembic import context
connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
"""

_APP_REVISION = """
from alembic import op
import sqlalchemy as sa
revision = "app0001"
down_revision = None
branch_labels = None
depends_on = None

def upgrade():
    op.create_table("orders", sa.Column("id", sa.Integer, primary_key=True), sa.Column("item", sa.String(50)))
    op.execute("INSERT INTO orders (id, item) VALUES (1, 'tea')")

def downgrade():
    op.drop_table("orders")
"""


def _app_config(tmp_path: Path) -> Config:
    scripts = tmp_path / "app_migrations"
    (scripts / "versions").mkdir(parents=True, exist_ok=True)
    (scripts / "env.py").write_text(_APP_ENV)
    (scripts / "versions" / "app0001.py").write_text(_APP_REVISION)
    config = Config()
    config.set_main_option("script_location", str(scripts))
    return config


def _app_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def test_coexists_with_an_applications_alembic_history(empty_url: str, tmp_path: Path) -> None:
    app_engine = create_engine(parse_url(empty_url))
    config = _app_config(tmp_path)
    try:
        with app_engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        assert _app_revision(app_engine) == "app0001"

        upgrade(empty_url)
        assert current(empty_url) == head()
        assert _app_revision(app_engine) == "app0001"
        with app_engine.connect() as conn:
            assert conn.execute(text("SELECT item FROM orders")).scalars().all() == ["tea"]
        store = SQLStore.from_url(empty_url, auto_upgrade=False)
        Conversation(store, "s", "a").append(Message.user("hi"))
        store.close()

        # Our autogenerate comparison ignores the application's tables...
        with app_engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"include_object": include_object, "version_table": VERSION_TABLE}
            )
            assert compare_metadata(context, Base.metadata) == []

        # ...and our downgrade leaves them and their history alone.
        downgrade(empty_url, "base")
        assert _app_revision(app_engine) == "app0001"
        tables = set(inspect(app_engine).get_table_names())
        assert {"orders", "alembic_version"} <= tables
        assert not tables & LEDGER_TABLES
    finally:
        app_engine.dispose()


def test_concurrent_upgrades_are_serialised(empty_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def run() -> None:
        try:
            barrier.wait(timeout=30)
            upgrade(empty_url)
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert current(empty_url) == head()


def test_migrations_found_inside_an_installed_package(tmp_path: Path) -> None:
    # The wheel ships migrations/ as contextledger/migrations; lay a package out that way.
    repo = Path(__file__).resolve().parents[2]
    site = tmp_path / "site"
    shutil.copytree(
        repo / "src" / "contextledger", site / "contextledger", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        repo / "migrations", site / "contextledger" / "migrations", ignore=shutil.ignore_patterns("__pycache__")
    )
    script = (
        "import contextledger.stores.sql as sql\n"
        "from contextledger.stores.sql.schema import migrations_dir\n"
        f"url = 'sqlite:///{tmp_path / 'installed.db'}'\n"
        "sql.upgrade(url)\n"
        "print(migrations_dir(), sql.current(url), sql.head(), sql.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    where, revision, expected, module = done.stdout.split()
    assert Path(module).is_relative_to(site)
    assert Path(where) == site / "contextledger" / "migrations"
    assert revision == expected == head()
