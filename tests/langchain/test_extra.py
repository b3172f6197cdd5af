"""Without its host package an integration says, in one typed line, how to install it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("integration", "hidden", "extra"),
    [("langchain", "langchain", "langchain"), ("pydantic_ai", "pydantic_ai", "pydantic-ai")],
)
def test_a_missing_host_package_raises_the_install_hint(integration: str, hidden: str, extra: str) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{hidden!r}] = None  # as if it were not installed
        from contextledger.errors import ContextLedgerError
        try:
            import contextledger.integrations.{integration}
        except ImportError as exc:
            assert isinstance(exc, ContextLedgerError), type(exc)
            print(exc)
        else:
            raise SystemExit("imported without its host package")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"contextledger.integrations.{integration} needs {hidden}: pip install 'contextledger[{extra}]'"
    )
