"""What one benchmark run holds: its sizes and its results (read by the runner and the report)."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

from _contenders import Spec
from _workers import Outcome

__all__ = ["POSTGRES_SETTINGS", "PYDANTIC_FLOOR", "SQLITE_DURABILITY", "Run", "Sizes", "machine"]

# Durability, the same for every contender on an engine (and of one class across them:
# a commit survives a crash of the process or the server; a power loss may take the
# last second of commits).
SQLITE_DURABILITY = "journal_mode=WAL, synchronous=NORMAL"
POSTGRES_SETTINGS = {"fsync": "on", "synchronous_commit": "off", "full_page_writes": "on"}

PYDANTIC_FLOOR = (
    "from pydantic import BaseModel, ConfigDict\n"
    "class Record(BaseModel):\n    model_config = ConfigDict(frozen=True, defer_build=True)\n    text: str\n"
)
"""A child's code: pydantic imported and one model class defined (its schema deferred, as ours are).

The fresh-process floor of any library whose records are pydantic models: defining a
first model imports what ``from pydantic import BaseModel`` alone does not.
"""


@dataclass
class Sizes:
    """The parameters of a run."""

    rounds: int
    warmup: int
    window: int
    history: list[int]
    fresh_rounds: int
    wide: int
    wide_rounds: int
    reduction: list[int]
    reduction_rounds: int
    storage: list[int]
    bmc_rounds: int
    bmc_batch: int
    ks: list[int]
    burst: float

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        # The reduction runs on the conversations the restore loaded (history[1:]).
        if quick:
            return cls(8, 2, 40, [40, 200, 1_000], 2, 100, 4, [200, 1_000], 6, [10, 20], 4, 200, [1, 2], 0.4)
        return cls(
            120,
            5,
            40,
            [40, 1_000, 10_000, 100_000],
            12,
            2_000,
            20,
            [1_000, 10_000, 100_000],
            60,
            [50, 100, 200],
            20,
            1_000,
            [1, 2, 4, 8],
            3.0,
        )


@dataclass
class Run:
    """Everything the report needs."""

    quick: bool
    sizes: Sizes
    specs: list[Spec]
    servers: dict[str, str | None] = field(default_factory=dict)
    server_info: dict[str, str] = field(default_factory=dict)
    # workload -> lane ("cl-sqlite" or "cl-sqlite@100000") -> outcome
    results: dict[str, dict[str, Outcome]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    load: tuple[float, float] = (0.0, 0.0)

    def put(self, workload: str, lane: str, outcome: Outcome) -> None:
        self.results.setdefault(workload, {})[lane] = outcome


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.machine()}",
        "cpu": cpu,
        "cores": str(os.cpu_count()),
    }
