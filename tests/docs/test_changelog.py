"""CHANGELOG.md follows Keep a Changelog, and its newest release is the package's version."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import contextledger
from tests.docs.examples import ROOT
from tests.plugins import unavailable

CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
RELEASE = re.compile(r"^## \[(?P<version>\d+\.\d+\.\d+)\] - (?P<date>\d{4}-\d{2}-\d{2})$", re.MULTILINE)
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_newest_release_is_the_package_version() -> None:
    newest = RELEASE.search(CHANGELOG)
    assert newest is not None
    assert newest["version"] == contextledger.__version__


def test_the_built_package_carries_the_same_version(tmp_path: Path) -> None:
    """The build reads ``__version__`` (pyproject.toml declares it dynamic): the wheel's metadata says the same."""
    if importlib.util.find_spec("hatchling") is None:
        unavailable("hatchling is not installed (pip install -e '.[dev]')")
    code = "import sys\nfrom hatchling.build import prepare_metadata_for_build_wheel as m\nprint(m(sys.argv[1]))"
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    metadata = (tmp_path / result.stdout.strip() / "METADATA").read_text(encoding="utf-8")
    assert f"\nVersion: {contextledger.__version__}\n" in metadata


def test_keep_a_changelog_layout() -> None:
    headings = re.findall(r"^(#{1,3}) (.+)$", CHANGELOG, re.MULTILINE)
    assert headings[0] == ("#", "Changelog")
    assert headings[1] == ("##", "[Unreleased]")  # upcoming changes come first
    releases = [(m["version"], m["date"]) for m in RELEASE.finditer(CHANGELOG)]
    assert [v for v, _ in releases][-2:] == ["0.2.0", "0.1.0"]
    versions = [_version(v) for v, _ in releases]
    assert versions == sorted(versions, reverse=True), "newest release first"
    dates = [date.fromisoformat(d) for _, d in releases]
    assert dates == sorted(dates, reverse=True)
    for level, title in headings[2:]:
        if level == "##":
            assert RELEASE.match(f"## {title}"), f"a release heading is '## [X.Y.Z] - YYYY-MM-DD', not {title!r}"
        else:
            assert title in SECTIONS, f"{title!r} is not a Keep a Changelog section"
    for version in ["Unreleased", *(v for v, _ in releases)]:  # each heading links to its changes
        assert re.search(rf"^\[{re.escape(version)}\]: https://", CHANGELOG, re.MULTILINE), version
