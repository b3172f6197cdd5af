"""What a user installs: the wheel holds every asset of the web view, the license and honest metadata."""

from __future__ import annotations

import re
import zipfile
from email.parser import Parser
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    from hatchling.builders.wheel import WheelBuilder

    out = tmp_path_factory.mktemp("dist")
    (path,) = list(WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"]))
    return zipfile.ZipFile(path)


def test_wheel_ships_templates_static_files_migrations_and_license(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for template in (
        "base.html",
        "sessions.html",
        "session.html",
        "entry.html",
        "reduction.html",
        "error.html",
        "_macros.html",
        "_reductions.html",
        "_history.html",
    ):
        assert f"contextledger/web/templates/{template}" in names
    for asset in (
        "style.css",
        "session.js",
        "vendor/uPlot.iife.min.js",
        "vendor/uPlot.min.css",
        "vendor/uPlot.LICENSE",
    ):
        assert f"contextledger/web/static/{asset}" in names
    assert "MIT License" in wheel.read("contextledger/web/static/vendor/uPlot.LICENSE").decode()
    assert any(n.startswith("contextledger/migrations/versions/") for n in names)
    assert "contextledger/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_metadata_license_classifiers_urls_extras_bounds(wheel: zipfile.ZipFile) -> None:
    (meta_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    meta = Parser().parsestr(wheel.read(meta_name).decode())
    assert meta["License-Expression"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Version 2.0" in (ROOT / "LICENSE").read_text()
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in classifiers)
    assert {u.split(",")[0] for u in meta.get_all("Project-URL") or []} >= {"Homepage", "Source", "Issues"}
    assert "web" in (meta.get_all("Provides-Extra") or [])
    requires = meta.get_all("Requires-Dist") or []
    for name in ("typer", "rich"):
        (spec,) = [r for r in requires if r.startswith(name) and "extra" not in r]
        assert "<" in spec, f"{name} needs an upper bound: {spec}"
    assert any(r.startswith("starlette") and re.search(r"extra == .web.", r) for r in requires)
    assert any(r.startswith("playwright") and re.search(r"extra == .dev.", r) for r in requires)


def _texts(folder: Traversable) -> list[str]:
    found = []
    for item in folder.iterdir():
        if item.is_dir():
            found += _texts(item)
        elif not item.name.endswith(".LICENSE"):
            found.append(item.read_text())
    return found


def test_assets_fetch_nothing_from_elsewhere() -> None:
    web = files("contextledger.web")
    texts = [text for folder in ("templates", "static") for text in _texts(web / folder)]
    assert len(texts) >= 12
    for text in texts:
        assert not re.search(r"(src|href)=\"(https?:)?//", text)
        assert "@import" not in text
        assert not re.search(r"url\((['\"])?(https?:)?//", text)
        assert not re.search(r"""(fetch|import)\(\s*["'`](https?:)?//""", text)


def test_the_page_script_never_writes_markup() -> None:
    script = (files("contextledger.web") / "static" / "session.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    # the vendored chart library sets text the same way
    chart = (files("contextledger.web") / "static" / "vendor" / "uPlot.iife.min.js").read_text()
    assert "innerHTML" not in chart
