"""The documentation site builds strictly -- with MkDocs (Material) and with Zensical -- from one mkdocs.yml.

Strict means a broken link or anchor, a page missing from the nav (or a nav entry
without a page), a snippet whose file is gone, or a docstring mkdocstrings cannot render
fails the build. Both builders run offline: no inventory or font is fetched. The `docs`
extra installs them; without it the tests skip, and fail under ``CI=true``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs.examples import DOCS, README, ROOT, name_of
from tests.plugins import early, unavailable

# A cold build of the API reference takes seconds; on a loaded machine, a minute or more.
TIMEOUT = 600
# What a build needs of the repository: the config, the pages, the sources of the API
# reference, and the files the pages include (CHANGELOG.md, RELIABILITY.md, benchmarks/).
BUILD_INPUTS = ("mkdocs.yml", "docs", "src", "README.md", "CHANGELOG.md", "RELIABILITY.md", "benchmarks")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        unavailable(f"{module} is not installed (pip install -e '.[docs]')")


def _env() -> dict[str, str]:
    # Material for MkDocs prints a banner about its successor on every build otherwise.
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}


def _check_site(site: Path) -> None:
    reference = (site / "reference" / "ledger" / "index.html").read_text(encoding="utf-8")
    assert 'id="contextledger.Ledger.connect"' in reference  # the API reference came from the docstrings
    assert 'id="contextledger.Conversation.before_model_call"' in reference  # inherited from its parts
    assert ":class:" not in reference  # the reST roles became links
    assert 'href="../errors/#contextledger.errors.LedgerClosed"' in reference
    reliability = (site / "reliability" / "index.html").read_text(encoding="utf-8")
    assert "SIGKILL" in reliability  # RELIABILITY.md is included, not copied
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "0.2.0" in changelog
    start = (site / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert "Refund order A-1042" in start  # the README's quickstart is included
    assert "[start:quickstart]" not in start
    assert (site / "benchmarks" / "history.png").is_file()
    assert not (site / "_griffe").exists()


def _copy_inputs(workdir: Path) -> None:
    """Zensical keeps its output and cache inside the project, so it builds a copy of the inputs."""
    project = workdir / "project"
    project.mkdir()
    for name in BUILD_INPUTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, project / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".data")
            )
        else:
            shutil.copy2(source, project / name)


# Each build takes many seconds and only its output is checked: both start when collection ends,
# side by side (each its own process and directory), and run while other tests do.
MKDOCS = early.job(
    "mkdocs_build",
    "mkdocs",
    lambda workdir: [
        *(sys.executable, "-m", "mkdocs", "build", "--strict"),
        *("--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(workdir / "site")),
    ],
    cwd=ROOT,
    env=_env(),
    timeout=TIMEOUT,
)
ZENSICAL = early.job(
    "zensical_build",
    "zensical",
    lambda workdir: [sys.executable, "-m", "zensical", "build", "--strict"],
    cwd=lambda workdir: workdir / "project",
    env=_env(),
    timeout=TIMEOUT,
    prepare=_copy_inputs,
)


@pytest.fixture(scope="module")
def mkdocs_build() -> early.Finished:
    """``mkdocs build --strict`` of the repository into a scratch directory."""
    _needs("mkdocs")
    _needs("material")
    _needs("mkdocstrings_handlers.python")
    return MKDOCS.result()


@pytest.fixture(scope="module")
def zensical_build() -> early.Finished:
    """``zensical build --strict`` of a copy of the build inputs."""
    _needs("zensical")
    _needs("mkdocstrings_handlers.python")
    return ZENSICAL.result()


def test_mkdocs_builds_the_site_strictly(mkdocs_build: early.Finished) -> None:
    assert mkdocs_build.returncode == 0, mkdocs_build.stderr
    _check_site(mkdocs_build.workdir / "site")


def test_zensical_builds_the_same_config_strictly(zensical_build: early.Finished) -> None:
    """Zensical keeps its output and cache inside the project, so it builds a copy of the inputs."""
    assert zensical_build.returncode == 0, zensical_build.stdout + zensical_build.stderr
    _check_site(zensical_build.workdir / "project" / "site")


def test_the_build_inputs_are_all_there() -> None:
    """The Zensical copy holds every file a page includes or a symlink in docs/ points to."""
    inputs = [ROOT / name for name in BUILD_INPUTS]
    included = [m for page in DOCS.rglob("*.md") for m in SNIPPET.findall(page.read_text(encoding="utf-8"))]
    needed = [ROOT / m.split(":", 1)[0] for m in included]  # "FILE:section" includes a marked part
    needed += [p.resolve() for p in DOCS.rglob("*") if p.is_symlink()]
    assert needed
    for path in needed:
        assert path.exists(), path
        assert any(path == i or path.is_relative_to(i) for i in inputs), f"{path} is not copied for Zensical"


def test_every_page_is_in_the_nav() -> None:
    """MkDocs warns (and so fails strictly) on a page left out of the nav; Zensical does not, so check here."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def entries(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [e for item in nav for e in entries(item)]
        if isinstance(nav, dict):
            return [e for value in nav.values() for e in entries(value)]
        return []

    listed = set(entries(config["nav"]))
    pages = {
        p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if not p.relative_to(DOCS).parts[0].startswith("_")
    }
    assert pages == listed


def test_the_readme_links_to_files_that_exist() -> None:
    """README.md is not a page of the site (GitHub shows it), so its relative links are checked here."""
    links = [link.split("#", 1)[0] for link in LINK.findall(README.read_text(encoding="utf-8"))]
    local = [link for link in links if link and "://" not in link]
    assert "docs/index.md" in local
    for link in local:
        assert (ROOT / link).exists(), f"{name_of(README)} links to {link}, which does not exist"
