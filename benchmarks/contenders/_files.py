"""Bytes on disk, counted the same way for every contender."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from _protocol import NotApplicable


def tree_bytes(path: str | Path) -> int:
    """Sum of the sizes of every file under ``path`` (or of ``path`` itself, and its -wal/-shm)."""
    root = Path(path)
    if root.is_dir():
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return sum(p.stat().st_size for p in root.parent.glob(root.name + "*") if p.is_file())


def stored_bytes(workload: str, close: Callable[[], None], path: str | Path) -> int:
    """A contender's ``measure``: after the storage workload, its store closed, the bytes under ``path``.

    Raises:
        NotApplicable: Any other workload (bytes are counted on the storage one).
    """
    if workload != "storage":
        raise NotApplicable("bytes are counted on the storage workload")
    close()
    return tree_bytes(path)
