"""The benchmark harness runs end to end (`scripts/bench --quick`) and writes a report of the right shape.

Only contextledger and the raw drivers run here (no peer is installed in the test
suite), and no timing is asserted: speed is measured in benchmarks/, not in tests.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins import early
from tests.soak import SOAK

ROOT = Path(__file__).resolve().parent.parent
ALL_WORKLOADS = (
    "append",
    "restore_window",
    "fresh_restore",
    "restore_wide",
    "reduction",
    "storage",
    "before_model_call",
    "concurrency",
    "floor",
)
# The default run drives every lane of the workloads the report's headline rows come
# from; soak mode runs them all (the others start processes per lane and take minutes).
WORKLOADS = ALL_WORKLOADS if SOAK else ("append", "restore_wide", "before_model_call", "storage", "floor")


def _bench(out: Path) -> list[str]:
    return [
        str(ROOT / "scripts" / "bench"),
        "--quick",
        "--contenders",
        "contextledger,raw",
        "--no-install",
        "--workloads",
        ",".join(WORKLOADS),
        "--out",
        str(out / "report"),
    ]


# The harness takes a minute or more and only its files are checked: it starts when collection ends.
BENCH = early.job("report", "bench", _bench, env=early.environment(VENV=str(Path(sys.executable).parent.parent)))


def _touched(_workdir: Path) -> list[str]:
    return [sys.executable, str(ROOT / "benchmarks" / "touched.py"), "--appends", "2", "--top", "3"]


# Four children under cachegrind, about a minute of another core: started when collection ends.
TOUCHED = early.job("touched_run", "touched", _touched, timeout=600)


@pytest.fixture(scope="module")
def touched_run() -> early.Finished:
    return TOUCHED.result()


def _compiled(workdir: Path) -> list[str]:
    # One small module and one round of three turns a tree; the tree is built in the job's
    # scratch directory (removed with it, even if the job is stopped).
    return [
        sys.executable,
        str(ROOT / "benchmarks" / "compiled.py"),
        "--modules",
        "contextledger/model/jsontext.py",
        "--rounds",
        "1",
        "--turns",
        "3",
        "--keep",
        str(workdir / "tree"),
        "--json",
    ]


# mypyc type-checks the library and a C compiler builds the extension: under a minute of another core.
COMPILED = early.job("compiled_run", "compiled", _compiled, timeout=600)


@pytest.fixture(scope="module")
def compiled_run() -> early.Finished:
    return COMPILED.result()


@pytest.fixture(scope="module")
def report() -> Path:
    done = BENCH.result()
    assert done.returncode == 0, done.stderr[-3000:]
    return done.workdir / "report"


@pytest.mark.slow
def test_every_contextledger_and_raw_lane_ran_or_says_why_not(report: Path) -> None:
    payload = json.loads((report / "results.json").read_text())
    assert payload["quick"] is True
    assert set(payload["results"]) == set(WORKLOADS)
    for workload, lanes in payload["results"].items():
        for lane, outcome in lanes.items():
            if outcome["na"] is not None:
                assert outcome["na"].strip(), (workload, lane)
                # Backends are there in this suite: only a workload out of scope may be n/a.
                assert not outcome["na"].startswith(("failed", "worker", "no PostgreSQL", "no Redis")), (
                    workload,
                    lane,
                    outcome["na"],
                )
            elif workload in ("storage", "concurrency", "floor"):
                assert outcome["value"] > 0, (workload, lane)
            else:
                assert outcome["samples"], (workload, lane)
                assert all(t > 0 for t in outcome["samples"]), (workload, lane)
                # Client CPU next to wall, one figure per repetition.
                assert len(outcome["cpu"]) == len(outcome["samples"]), (workload, lane)
                assert all(c >= 0 for c in outcome["cpu"]), (workload, lane)
                assert sum(outcome["cpu"]) > 0, (workload, lane)
    ran = {lane for lane, o in payload["results"]["append"].items() if o["na"] is None}
    assert {"cl-sqlite", "cl-postgres", "cl-redis", "raw-sqlite", "raw-postgres", "raw-redis"} <= ran
    assert {"cl-async-sqlite", "cl-async-postgres", "cl-async-redis"} <= ran
    restored = {lane for lane, o in payload["results"]["restore_wide"].items() if o["na"] is None}
    assert {"cl-async-sqlite", "cl-async-postgres", "cl-async-redis"} <= restored
    # before_model_call: the durable count and the count deferred to the next commit
    bmc = {lane for lane, o in payload["results"]["before_model_call"].items() if o["na"] is None}
    assert {"cl-memory", "cl-memory+deferred", "cl-sqlite", "cl-sqlite+deferred"} <= bmc


@pytest.mark.slow
def test_results_md_states_the_setup_and_every_target(report: Path) -> None:
    text = (report / "RESULTS.md").read_text()
    sections = {"fresh_restore": "## Restore in a fresh process", "reduction": "## Reduction commit"}
    for needle in (
        "# Benchmark results",
        "Machine:",
        "Durability",
        "synchronous=NORMAL",
        "fsync=on",
        "appendonly=yes",
        "## Targets",
        "## Append one turn",
        "## Bytes on disk",
        "## Not applicable",
        *(title for workload, title in sections.items() if workload in WORKLOADS),
    ):
        assert needle in text, needle
    targets = json.loads((report / "results.json").read_text())["targets"]
    assert len(targets) >= 14
    one = {"met", "**missed**", "not measured"}
    both = {f"wall {w}, CPU {c}" for w in one for c in one}  # a verdict per clock
    assert {t["verdict"] for t in targets} <= one | both | {"-"}
    assert any(t["verdict"] in both for t in targets)
    rows = [line for line in text.splitlines() if line.startswith("| append, contextledger (SQLite): within 2x")]
    assert len(rows) == 1
    assert rows[0].count("|") == 4
    assert "wall " in rows[0]
    assert "client CPU " in rows[0]
    # The version measured is the checkout's, and the load average is recorded.
    import contextledger

    assert f"contextledger {contextledger.__version__}" in text
    assert re.search(r"load average \(1 min\) \d+\.\d at the start, \d+\.\d at the end", text)
    # Every contender's durability, in its own table and next to each append figure.
    durability = text[text.index("| contender | durability settings |") :].split("\n\n", 1)[0]
    payload = json.loads((report / "results.json").read_text())
    contenders = payload["contenders"]
    for lane, outcome in payload["results"]["append"].items():
        stated = contenders[lane]["durability"]
        assert stated, lane
        assert f"| {contenders[lane]['label']} | {stated} |" in durability, lane
        if outcome["na"] is None:  # the append figure has its setting next to it
            assert f"| {contenders[lane]['label']} | {stated} | " in text.split("## Append one turn", 1)[1], lane
    assert "| contextledger (PostgreSQL), PostgreSQL's default | server: synchronous_commit=on" in durability
    assert "client CPU ms / turn" in text


@pytest.mark.slow
def test_the_append_against_its_own_statements_replayed_is_a_target_on_every_engine(report: Path) -> None:
    payload = json.loads((report / "results.json").read_text())
    figures = payload["results"]["floor"]["floor"]["info"]
    assert {f["engine"] for f in figures["floor.py"]} == {"sqlite", "postgres", "redis"}
    rows = {t["target"]: t for t in payload["targets"]}
    for label in ("contextledger (SQLite)", "contextledger (PostgreSQL)", "contextledger (Redis)"):
        (row,) = [t for name, t in rows.items() if name.startswith(f"append, {label}: within 1.5x of its own")]
        # Both clocks, each with its verdict, and the two CPU figures the ratio divides.
        assert re.fullmatch(r"wall \d+\.\d\dx, client CPU \d+\.\d\dx \([\d,]+ vs [\d,]+ us\)", row["measured"]), row
        assert re.fullmatch(r"wall (met|\*\*missed\*\*), CPU (met|\*\*missed\*\*)", row["verdict"]), row
    (writer,) = [t for name, t in rows.items() if name.startswith("a plain Python writer of the same rows")]
    assert writer["verdict"] == "-"
    assert re.fullmatch(r"\d+\.\d\dx \(the ledger's append \d+\.\d\dx\)", writer["measured"]), writer
    text = (report / "RESULTS.md").read_text()
    section = text.split("## The append against its own statements replayed", 1)[1].split("\n## ", 1)[0]
    for engine in ("sqlite", "postgres", "redis"):
        assert f"| {engine} |" in section, engine
    assert "| rows built by hand |" in section  # the call table's header


@pytest.mark.slow
def test_plots_are_pngs(report: Path) -> None:
    for name in ("history.png", "append.png", *(["concurrency.png"] if "concurrency" in WORKLOADS else [])):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_no_helper_module_imports_the_runner() -> None:
    # run.py imports the helpers (_report, _run, ...); one importing run.py back -- even for a
    # type, or inside a function -- made a cycle. What both need lives in _run.py.
    for path in sorted((ROOT / "benchmarks").glob("_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        imported = {
            name
            for node in ast.walk(tree)
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        assert "run" not in imported, f"{path.name} imports run.py"


def _floor(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "benchmarks" / "floor.py"), "--engines", "sqlite", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("cold", [False, True], ids=["warm", "cold"])
def test_floor_times_the_four_lanes_warm_and_cold(cold: bool) -> None:
    # Few turns and a small eviction buffer: the shape of the figures, never their size.
    done = _floor("--turns", "4", "--json", *(["--cold", "--cold-mb", "4"] if cold else []))
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("{")]
    figures = json.loads(line)
    assert (figures["engine"], figures["turns"], figures["cold"]) == ("sqlite", 4, cold)
    for lane in ("ledger", "replayed", "plain", "built"):
        assert figures[lane]["cpu_us"] > 0, lane
        assert figures[lane]["wall_us"] > 0, lane
    for base in ("replayed", "plain"):
        assert figures[f"vs_{base}"]["cpu_us"] == figures["ledger"]["cpu_us"] / figures[base]["cpu_us"]
    assert figures["built_vs_plain"]["cpu_us"] == figures["built"]["cpu_us"] / figures["plain"]["cpu_us"]


@pytest.mark.parametrize("managed", [False, True], ids=["plain", "managed"])
def test_layer_times_its_three_lanes_and_the_stages(managed: bool) -> None:
    # A few turns: the shape of the report, never its figures.
    command = [sys.executable, str(ROOT / "benchmarks" / "layer.py"), "--turns", "3", "--stages"]
    done = subprocess.run(
        [*command, *(["--manager"] if managed else [])], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    header = done.stdout.splitlines()[0]
    assert ("a sliding window managing each conversation" in header) is managed
    lanes = dict(re.findall(r"^  (memory|sqlite|layer)\s+([0-9.]+) us$", done.stdout, re.MULTILINE))
    assert set(lanes) == {"memory", "sqlite", "layer"}
    assert all(float(us) > 0 for us in lanes.values())
    assert "store: commit (JSON check included)" in done.stdout


def test_driver_calls_splits_the_ledger_lane_into_its_calls_and_the_rest() -> None:
    # A few turns: the shape of the figures, never their size.
    command = [sys.executable, str(ROOT / "benchmarks" / "driver_calls.py"), "--turns", "3"]
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("{")]
    figures = json.loads(line)
    calls = {"BEGIN", "UPDATE cl_conversations", "INSERT INTO cl_changesets", "INSERT INTO cl_entries", "COMMIT"}
    lanes = ("ledger", "replayed", "replayed, Python between", "rows built by hand")
    for lane in lanes:
        # Every lane sent the same calls (the replays are the ledger's own), each timed; the
        # rows built by hand were the ledger's rows, or the run would have failed above.
        assert set(figures[lane]) == {*calls, "all driver calls"}, (lane, figures[lane])
        assert all(us > 0 for us in figures[lane].values()), (lane, figures[lane])
    assert set(figures["whole"]) == set(lanes)
    # A whole step holds its driver calls and the Python around them.
    assert all(figures["whole"][lane] > figures[lane]["all driver calls"] for lane in lanes), figures
    assert 0 < figures["ledger outside the driver"] < figures["ledger append"] == figures["whole"]["ledger"]
    refused = subprocess.run([*command[:-1], "0"], capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert "--turns must be at least 1, got 0" in refused.stderr


@pytest.mark.slow
def test_compiled_runs_both_trees_with_the_module_loaded_from_its_extension(compiled_run: early.Finished) -> None:
    # The shape of the report and what was built, never the size of the figures.
    if compiled_run.returncode == 2 and "cannot compile:" in compiled_run.stderr:
        pytest.skip(compiled_run.stderr.strip())
    assert compiled_run.returncode == 0, compiled_run.stderr[-3000:]
    figures = json.loads(compiled_run.stdout.strip().splitlines()[-1])
    assert figures["modules"] == ["contextledger/model/jsontext.py"]
    assert [(r["round"], r["tree"]) for r in figures["rounds"]] == [(1, "interpreted"), (1, "compiled")]
    lanes = ("ledger", "replayed", "rows built by hand")
    assert all(r[lane] > 0 for r in figures["rounds"] for lane in lanes), figures["rounds"]
    # The script checked that the module loaded from its extension; the extension is there.
    package = compiled_run.workdir / "tree" / "src" / "contextledger" / "model"
    assert list(package.glob("jsontext.*.so")), sorted(p.name for p in package.iterdir())
    interpreted, compiled = figures["rounds"]
    assert figures["summary"]["compiled / interpreted"] == pytest.approx(
        (compiled["ledger"] / compiled["replayed"]) / (interpreted["ledger"] / interpreted["replayed"])
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rounds", "0"), "--rounds must be at least 1, got 0"),
        (("--turns", "0"), "--turns must be at least 1, got 0"),
        (
            ("--modules", "contextledger/nowhere.py"),
            "--modules must name files under src/, got ['contextledger/nowhere.py']",
        ),
    ],
)
def test_compiled_refuses_bad_arguments(args: tuple[str, ...], message: str) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "compiled.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert message in done.stderr


def test_floor_refuses_an_eviction_buffer_of_no_size() -> None:
    done = _floor("--turns", "1", "--cold", "--cold-mb", "0")
    assert done.returncode == 2
    assert "--cold-mb must be positive, got 0" in done.stderr


@pytest.mark.slow
def test_touched_counts_both_lanes_under_cachegrind(touched_run: early.Finished) -> None:
    # Two appends a run: the shape of the report, never the size of its counts.
    assert touched_run.returncode == 0, touched_run.stderr[-3000:]
    rows = {line.split("|")[1].strip(): line for line in touched_run.stdout.splitlines() if line.startswith("| ")}
    assert {"contender", "ledger", "plain", "ledger / plain"} <= rows.keys()
    for lane in ("ledger", "plain"):
        instructions = int(rows[lane].split("|")[2].strip().replace(",", ""))
        assert instructions > 0, rows[lane]
    assert re.fullmatch(r"\| ledger / plain( \| (-?[0-9.]+x|-)){5} \|", rows["ledger / plain"]), rows["ledger / plain"]
    listed = touched_run.stdout.split("data-read misses by function", 1)[1].strip().splitlines()[1:]
    assert len(listed) == 3, touched_run.stdout


def test_window_turn_times_its_lanes_against_another_tree() -> None:
    # This tree against itself, a few turns: the shape of the report, never its figures.
    command = [sys.executable, str(ROOT / "benchmarks" / "window_turn.py"), "--turns", "3", "--rounds", "1"]
    done = subprocess.run(
        [*command, "--against", str(ROOT / "src"), "--json"], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("{")]
    figures = json.loads(line)
    assert figures["lanes"] == ["turn (memory)", "turn (SQLite)", "evict a turn (SQLite)"]
    for tree in ("this tree", "other tree"):
        assert len(figures[tree]) == 3
        assert all(us > 0 for us in figures[tree]), figures
    ratios = re.findall(r"\| ([0-9.]+)x \|$", done.stdout, re.MULTILINE)
    assert len(ratios) == 3, done.stdout
    refused = subprocess.run([*command, "--warmup", "5"], capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert "--warmup must be at least 10" in refused.stderr
