"""The package's import graph has no cycle (``TYPE_CHECKING`` imports count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import contextledger

ROOT = Path(contextledger.__file__).parent


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its source (ast, not runtime)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                # Importing a.b.c runs the packages a and a.b first: those are edges too.
                parts = target.split(".")
                for end in range(1, len(parts) + 1):
                    candidate = ".".join(parts[:end])
                    # A module's own ancestor packages are initialised before it runs.
                    if candidate in graph and candidate != name and not name.startswith(candidate + "."):
                        graph[name].add(candidate)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 40  # the whole package was read
    assert cycles(graph) == []


def test_type_checking_imports_count(tmp_path: Path) -> None:
    # An import made only for the type checker is still an edge (and can close a cycle).
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\nclass B: ...\n"
    )
    graph = import_graph(package)
    assert graph["pkg.b"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_the_real_graph_has_the_expected_edges() -> None:
    graph = import_graph()
    assert "contextledger.stores.base" in graph["contextledger.conversation.conversation"]
    assert "contextledger.core.building" in graph["contextledger.conversation.pins"]
    assert "contextledger.core.changeset" in graph["contextledger.core.building"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
