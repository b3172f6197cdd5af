"""A SQLite append with its hot path compiled to C by mypyc, against the same code interpreted.

``driver_calls.py`` splits an append into the driver's calls and the Python around them.
This asks whether that Python shrinks when the modules it runs are compiled: mypyc,
the compiler that comes with mypy, turns fully typed modules (the library's are, under
``mypy --strict``) into C extensions. The script copies the library's source into a
temporary directory, compiles ``--modules`` there, checks that each of them now loads
from its extension, and runs ``driver_calls.py --json`` alternately on the interpreted
tree and the compiled one, ``--rounds`` times each, the first tree changing every round.

The default modules are those of an append's path that mypyc compiles as they are
written. The others on the path use what it does not compile or what compiled classes
do not allow: a runtime-checkable ``Protocol``, a subclass of a built-in type, a
``continue`` inside ``try``/``finally``, an instance ``__dict__``, a compiled base class
with interpreted subclasses.

Printed, per round and tree: the whole step of the ledger's lane, of the replay and of
the rows built by hand, in microseconds of CPU, and the ledger's and the hand-built
writer's step against the replay's; then the medians per tree, and the compiled tree's
ledger step against the interpreted tree's (each against its own replay, so that the
rounds' load cancels).

Needs what mypyc needs (setuptools, a C compiler and the interpreter's headers):
without one of them it says which is missing and exits with status 2.

    python benchmarks/compiled.py                          # 4 rounds of 300 turns
    python benchmarks/compiled.py --rounds 2 --turns 100 --keep /tmp/compiled
    python benchmarks/compiled.py --write-results          # also its section of DETAILS.md
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _details import publish

ROOT = Path(__file__).resolve().parent.parent
MODULES = (
    "contextledger/model/jsontext.py",
    "contextledger/core/viewfacts.py",
    "contextledger/core/building.py",
    "contextledger/conversation/shared.py",
    "contextledger/stores/sql/write/apply.py",
    "contextledger/stores/sql/write/guard.py",
    "contextledger/stores/sql/write/sqlite_hot.py",
    "contextledger/stores/sql/write/sqlite_writer.py",
)
TREES = ("interpreted", "compiled")
LANES = ("ledger", "replayed", "rows built by hand")


def missing_tools() -> str | None:
    """What mypyc needs and this machine lacks, or ``None``."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (it comes with mypy)"
    if importlib.util.find_spec("setuptools") is None:
        return "setuptools is not installed (mypyc builds its extensions with it)"
    compiler = os.environ.get("CC", "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler!r} is not on PATH)"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.exists():
        return f"the interpreter's headers are missing ({headers})"
    return None


def build(tree: Path, modules: tuple[str, ...]) -> None:
    """Copy the library's source under ``tree/src`` and compile ``modules`` there.

    Raises:
        RuntimeError: mypyc failed (its output's end is in the message), or a module did
            not load from its extension afterwards.
    """
    src = tree / "src"
    shutil.copytree(ROOT / "src" / "contextledger", src / "contextledger", ignore=shutil.ignore_patterns("__pycache__"))
    # Where the store looks for its migrations beside a source tree.
    shutil.copytree(ROOT / "migrations", tree / "migrations", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "mypyc", *modules],
        cwd=src,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"mypyc failed:\n{(done.stdout + done.stderr)[-3000:]}")
    shutil.rmtree(src / "build", ignore_errors=True)  # its intermediate files, not a package
    names = [module.removesuffix(".py").replace("/", ".") for module in modules]
    probe = "import importlib, sys\nfor name in sys.argv[1:]:\n    print(importlib.import_module(name).__file__)"
    loaded = subprocess.run(
        [sys.executable, "-c", probe, *names], env=_env(src), capture_output=True, text=True, check=False
    )
    files = loaded.stdout.split()
    if loaded.returncode != 0 or len(files) != len(names) or not all(f.endswith(".so") for f in files):
        raise RuntimeError(f"the compiled modules did not load from their extensions: {files} {loaded.stderr[-2000:]}")


def _env(src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(src), env.get("PYTHONPATH"))))
    return env


def run_once(src: Path, turns: int) -> dict[str, float]:
    """One ``driver_calls.py --json`` run on the library under ``src``: each lane's whole step, in us.

    Raises:
        RuntimeError: The run failed (its error output's end is in the message).
    """
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "driver_calls.py"), "--turns", str(turns), "--json"],
        env=_env(src),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"driver_calls.py failed on {src}:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {lane: float(figures["whole"][lane]) for lane in LANES}


def measure(tree: Path, modules: tuple[str, ...], rounds: int, turns: int) -> dict[str, Any]:
    """Build the compiled tree, then run both trees alternately; every round's steps."""
    build(tree, modules)
    sources = {"interpreted": ROOT / "src", "compiled": tree / "src"}
    found: list[dict[str, Any]] = []
    for n in range(rounds):
        order = TREES if n % 2 == 0 else TREES[::-1]
        for name in order:
            found.append({"round": n + 1, "tree": name, **run_once(sources[name], turns)})
    return {"modules": list(modules), "turns": turns, "rounds": found, "summary": summary(found)}


def summary(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """Per tree, the medians of the ledger's and the hand-built writer's steps against the replay; their quotient."""
    out: dict[str, float] = {}
    for name in TREES:
        mine = [r for r in rounds if r["tree"] == name]
        out[f"{name} ledger / replayed"] = statistics.median(r["ledger"] / r["replayed"] for r in mine)
        out[f"{name} rows built by hand / replayed"] = statistics.median(
            r["rows built by hand"] / r["replayed"] for r in mine
        )
    out["compiled / interpreted"] = out["compiled ledger / replayed"] / out["interpreted ledger / replayed"]
    return out


def table(figures: dict[str, Any], load: str) -> list[str]:
    """The Markdown table of :func:`measure`'s figures."""
    lines = [
        f"A SQLite append's whole step, interpreted and with {len(figures['modules'])} modules of its path "
        f"compiled by mypyc ({', '.join(m.removesuffix('.py').split('/')[-1] for m in figures['modules'])}); "
        f"each round one `driver_calls.py` run of {figures['turns']} turns per tree, medians of its turns, "
        f"microseconds of CPU ({load}).",
        "",
        "| round | tree | ledger | replayed | rows built by hand | ledger / replayed | by hand / replayed |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in figures["rounds"]:
        lines.append(
            f"| {r['round']} | {r['tree']} | {r['ledger']:.1f} | {r['replayed']:.1f} | {r['rows built by hand']:.1f} "
            f"| {r['ledger'] / r['replayed']:.2f}x | {r['rows built by hand'] / r['replayed']:.2f}x |"
        )
    s = figures["summary"]
    lines += [
        "",
        "Medians of the rounds: the ledger's append against the replay "
        f"{s['interpreted ledger / replayed']:.2f}x interpreted, {s['compiled ledger / replayed']:.2f}x compiled "
        f"(compiled against interpreted, each against its own replay: {s['compiled / interpreted']:.2f}x); "
        f"the rows built by hand {s['interpreted rows built by hand / replayed']:.2f}x and "
        f"{s['compiled rows built by hand / replayed']:.2f}x (their code is the same in both trees).",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns per driver_calls.py run")
    parser.add_argument("--rounds", type=int, default=4, help="runs per tree, alternating")
    parser.add_argument("--modules", default=",".join(MODULES), help="comma-separated paths under src/")
    parser.add_argument("--keep", type=Path, help="build the compiled tree here and keep it")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--write-results", action="store_true", help="write its section of DETAILS.md")
    args = parser.parse_args()
    for name in ("turns", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    modules = tuple(m.strip() for m in args.modules.split(",") if m.strip())
    unknown = [m for m in modules if not (ROOT / "src" / m).is_file()]
    if not modules or unknown:
        parser.error(f"--modules must name files under src/, got {unknown or 'none'}")
    if (why := missing_tools()) is not None:
        print(f"cannot compile: {why}", file=sys.stderr)
        raise SystemExit(2)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep must be a new or empty directory: {args.keep}")
    before = os.getloadavg()
    if args.keep is not None:
        figures = measure(args.keep, modules, args.rounds, args.turns)
    else:
        with tempfile.TemporaryDirectory() as directory:
            figures = measure(Path(directory), modules, args.rounds, args.turns)
    title = "## A SQLite append with its hot path compiled by mypyc (`benchmarks/compiled.py`)"
    publish(figures, before, os.getloadavg(), table, as_json=args.json, title=title if args.write_results else None)


if __name__ == "__main__":
    main()
