"""Bytes on disk, counted the same way for every contender."""

from __future__ import annotations

from pathlib import Path


def tree_bytes(path: str | Path) -> int:
    """Sum of the sizes of every file under ``path`` (or of ``path`` itself, and its -wal/-shm)."""
    root = Path(path)
    if root.is_dir():
        return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return sum(p.stat().st_size for p in root.parent.glob(root.name + "*") if p.is_file())
