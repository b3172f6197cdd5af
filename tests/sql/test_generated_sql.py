"""The SQLite reader's SQL text is generated from the Core statements, never kept by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contextledger.stores.sql.read import generate, sqlite_sql
from contextledger.stores.sql.read.statements import FLAGS, flag_sets

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_module_is_current() -> None:
    # Fails when a statement changed without `scripts/generate-sqlite-sql` being run.
    assert generate.TARGET.read_text(encoding="utf-8") == generate.render()


def test_the_script_reports_a_stale_module() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate-sqlite-sql"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


def test_every_flag_set_is_compiled_once() -> None:
    expected = {(name, flags) for name in FLAGS for flags in flag_sets(name)}
    assert set(sqlite_sql.SQL) == expected
    # limit and last exclude each other; every other combination of a listing's flags is there.
    assert ("history", ("last", "limit")) not in sqlite_sql.SQL
    assert len([key for key in sqlite_sql.SQL if key[0] == "history"]) == 24


def test_the_generated_module_imports_no_sqlalchemy() -> None:
    code = (
        "import sys\n"
        "import contextledger.stores.sql.read.sqlite_sql, contextledger.stores.sql.read.runner\n"
        "import contextledger.stores.sql.read.listings\n"
        "print(any(m == 'sqlalchemy' or m.startswith('sqlalchemy.') for m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
