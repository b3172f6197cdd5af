"""The async API (and everything else in the package) uses SQLAlchemy's public API only.

The 0.2 bridge leaned on ``sqlalchemy.util.concurrency`` (greenlet_spawn), which SQLAlchemy
does not present as public; the async API is now a shell of threads over the sync core.
This fails, naming the module, if an import of SQLAlchemy's utilities or of a private
module (a ``_name`` part) comes back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import contextledger

PACKAGE = Path(contextledger.__file__).parent


def _sqlalchemy_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return [name for name in found if name.split(".")[0] == "sqlalchemy"]


def test_no_module_imports_sqlalchemy_internals() -> None:
    offending = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in _sqlalchemy_imports(path)
        if name.startswith("sqlalchemy.util") or any(part.startswith("_") for part in name.split("."))
    }
    assert not offending, f"non-public SQLAlchemy imports: {sorted(offending)}"


def test_the_check_sees_sqlalchemy_imports() -> None:
    # The walk finds the engine module's imports, so an empty result above means something.
    assert "sqlalchemy.create_engine" in _sqlalchemy_imports(PACKAGE / "stores" / "sql" / "engine.py")
