"""Fixtures of the lifecycle tests: the command-line runner of the CLI tests."""

from tests.cli.conftest import invoke

__all__ = ["invoke"]
