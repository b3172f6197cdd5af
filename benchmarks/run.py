"""The benchmark harness: every workload against every contender, in one run.

contextledger (SQLite, PostgreSQL, Redis), the raw drivers doing the same writes (the
physical limit), and the peers a user would pick instead, each in a worker process of
its own (the peers in their own virtual environments), driven alternately through one
JSON-lines protocol: repetitions are interleaved across contenders so that drift on a
shared machine hits all alike. Reports medians, 95th percentiles and ratios to
``RESULTS.md``, the raw figures to ``results.json`` and plots as PNG.

    scripts/bench                          # everything, peers installed on first use
    scripts/bench --quick                  # small sizes, a few repetitions
    scripts/bench --quick --contenders contextledger,raw --no-install --out /tmp/b
    scripts/bench --workloads append,restore_wide

Servers: ``CONTEXTLEDGER_TEST_POSTGRES_URL`` / ``CONTEXTLEDGER_TEST_REDIS_URL`` when set,
else throwaway local servers (stopped by pid at the end) started with the durability
settings stated in the report.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The server launchers live with the tests (tests/plugins/): the checkout's root must be importable.
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from _contenders import DEFERRED, Spec, select  # noqa: E402
from _run import POSTGRES_SETTINGS, PYDANTIC_FLOOR, Run, Sizes  # noqa: E402
from _workers import HERE, PEER_PACKAGES, Outcome, Worker, peer_python, peer_versions  # noqa: E402

WORKLOADS = (
    "append",
    "restore_window",
    "fresh_restore",
    "restore_wide",
    "reduction",
    "storage",
    "before_model_call",
    "concurrency",
    "strands_turn",
    "aio",
    "floor",
)

REDIS_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")


# -- servers -----------------------------------------------------------------------------


@contextmanager
def postgres(stack: ExitStack) -> Iterator[tuple[str | None, str, str | None]]:
    """A scratch database URL, a line stating its settings (``None``: no server), and a
    second scratch database at PostgreSQL's default ``synchronous_commit=on`` (set on the
    database: every connection to it gets it, whatever its client sets or not)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from contextledger.errors import StoreUnavailable

    env = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES_URL")
    if env:
        base = env
    else:
        from tests.plugins.postgres_server import find_binaries, start_postgres

        if find_binaries() is None:
            yield None, "no PostgreSQL binaries", None
            return
        try:
            server = start_postgres(settings=POSTGRES_SETTINGS)
        except StoreUnavailable as exc:
            yield None, str(exc), None
            return
        stack.callback(server.stop)
        base = server.url
    name = f"cl_bench_{uuid.uuid4().hex[:10]}"
    default = f"{name}_default"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
        conn.execute(text(f"CREATE DATABASE {default}"))
        conn.execute(text(f"ALTER DATABASE {default} SET synchronous_commit = on"))
        settings = {s: conn.execute(text(f"SHOW {s}")).scalar() for s in ("server_version", *POSTGRES_SETTINGS)}
    try:
        url = make_url(base).set(database=name).render_as_string(hide_password=False)
        default_url = make_url(base).set(database=default).render_as_string(hide_password=False)
        probe = create_engine(default_url)
        with probe.connect() as conn:  # what a connection to it gets, read back
            assert conn.execute(text("SHOW synchronous_commit")).scalar() == "on"
        probe.dispose()
        info = ", ".join(f"{k}={v}" for k, v in settings.items() if k != "server_version")
        yield url, f"PostgreSQL {str(settings['server_version']).split()[0]} ({info})", default_url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            conn.execute(text(f"DROP DATABASE IF EXISTS {default} WITH (FORCE)"))
        admin.dispose()


def redis(stack: ExitStack) -> tuple[str | None, str]:
    """A Redis URL and a line stating its persistence (``None``: no server)."""
    from redis import Redis
    from tests.plugins.redis_server import start_local_redis

    from contextledger.errors import StoreUnavailable

    url = os.environ.get("CONTEXTLEDGER_TEST_REDIS_URL")
    if not url:
        try:
            server = start_local_redis(REDIS_ARGS)
        except StoreUnavailable as exc:
            return None, str(exc)
        stack.callback(server.stop)
        url = server.url
    client = Redis.from_url(url)
    try:
        conf: dict[str, str] = {}
        for name in ("appendonly", "appendfsync"):
            conf.update({str(k): str(v) for k, v in dict(client.config_get(name)).items()})
        version = client.info("server")["redis_version"]
    finally:
        client.close()
    return url, f"Redis {version} (" + ", ".join(f"{k}={v}" for k, v in conf.items()) + ")"


# -- driving workers ---------------------------------------------------------------------


@dataclass
class Lane:
    """One worker in one workload: a contender, maybe at one size."""

    name: str
    spec: Spec
    worker: Worker | None
    outcome: Outcome


class Harness:
    def __init__(self, run: Run, workdir: Path, *, install: bool) -> None:
        self.run = run
        self.workdir = workdir
        self.install = install
        self.pythons: dict[str, tuple[Path | None, str]] = {}
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def python(self, spec: Spec) -> tuple[Path | None, str]:
        if spec.env is None:
            return Path(sys.executable), ""
        if spec.env not in self.pythons:
            self.pythons[spec.env] = peer_python(spec.env, install=self.install)
            python = self.pythons[spec.env][0]
            if python is not None:
                self.run.versions.update(peer_versions(python, [_dist(p) for p in PEER_PACKAGES[spec.env]]))
        return self.pythons[spec.env]

    def open(self, workload: str, spec: Spec, name: str, params: dict[str, Any], directory: Path) -> Lane:
        """Start a worker and set it up; the lane's outcome says n/a when anything is missing."""
        if workload not in spec.does:
            return Lane(name, spec, None, Outcome(na=spec.reason(workload)))
        built = spec.params(workload, directory, self.run.servers)
        if isinstance(built, str):
            return Lane(name, spec, None, Outcome(na=built))
        python, why = self.python(spec)
        if python is None:
            return Lane(name, spec, None, Outcome(na=why))
        worker = Worker(python, spec.worker, self.logs)
        reply = worker.request(op="setup", workload=workload, params={**built, **params})
        if "na" in reply:
            worker.close()
            return Lane(name, spec, None, Outcome(na=reply["na"]))
        return Lane(name, spec, worker, Outcome(info=reply.get("info") or {}))

    def interleave(self, lanes: list[Lane], *, warmup: int, rounds: int) -> None:
        """Step every live lane ``warmup`` + ``rounds`` times, alternating, the order rotated each round."""
        live = [lane for lane in lanes if lane.worker is not None]
        for r in range(warmup + rounds):
            order = live[r % len(live) :] + live[: r % len(live)] if live else []
            if r % 2:
                order.reverse()
            for lane in order:
                assert lane.worker is not None
                if lane.outcome.na is not None:
                    continue
                reply = lane.worker.request(op="step", n=r)
                if "na" in reply:
                    lane.outcome.na = reply["na"]
                elif r >= warmup:
                    lane.outcome.samples.append(float(reply["t"]))
                    if reply.get("cpu") is not None:
                        lane.outcome.cpu.append(float(reply["cpu"]))

    def finish(self, workload: str, lanes: list[Lane]) -> None:
        for lane in lanes:
            if lane.worker is not None:
                lane.worker.close()
            self.run.put(workload, lane.name, lane.outcome)
        print(f"{workload}: done at {time.strftime('%H:%M:%S')}", file=sys.stderr, flush=True)

    # -- the workloads ---------------------------------------------------------------------

    def append(self) -> None:
        sizes = self.run.sizes
        w = sizes.window
        lanes = [
            self.open("append", s, s.key, {"session": f"append-{s.key}", "window": w}, self.workdir / "append" / s.key)
            for s in self.run.specs
        ]
        self.interleave(lanes, warmup=sizes.warmup, rounds=sizes.rounds)
        self.finish("append", lanes)

    def restore_window(self) -> None:
        sizes = self.run.sizes
        lanes = []
        for spec in self.run.specs:
            for entries in sizes.history:
                params = {"session": f"window-{entries}", "entries": entries, "active": sizes.window}
                lanes.append(
                    self.open("restore_window", spec, f"{spec.key}@{entries}", params, self.workdir / "window")
                )
        self.interleave(lanes, warmup=3, rounds=sizes.rounds // 2)
        self.finish("restore_window", lanes)

    def fresh_restore(self) -> None:
        """Import, connect, open, read the context: a new interpreter per repetition."""
        sizes = self.run.sizes
        big = sizes.history[-1]
        db = self.workdir / "window" / "cl-sqlite.db"
        raw = self.workdir / "window" / "raw-sqlite.db"
        found = self.run.results.get("restore_window", {})
        session = f"window-{big}"
        children: dict[str, tuple[Spec | None, list[str] | None, str]] = {}
        cl = next((s for s in self.run.specs if s.key == "cl-sqlite"), None)
        rawspec = next((s for s in self.run.specs if s.key == "raw-sqlite"), None)
        cl_code = (
            "import sys\nfrom contextledger import Ledger\n"
            f"ledger = Ledger.connect({f'sqlite:///{db}'!r})\n"
            f"messages = ledger.conversation({session!r}, 'agent').messages\n"
            f"assert len(messages) == {sizes.window}, len(messages)\nledger.close()\n"
            "print(len(sys.modules), int('alembic' in sys.modules), int('typer' in sys.modules))\n"
        )
        raw_code = (
            "import json, sqlite3, sys\n"
            f"conn = sqlite3.connect({str(raw)!r})\n"
            "rows = conn.execute(\"SELECT role, content FROM raw_msg WHERE session_id = ? AND status = 'active' "
            f'ORDER BY seq", ({session!r},)).fetchall()\n'
            "messages = [{'role': r, 'content': json.loads(c)} for r, c in rows]\n"
            f"assert len(messages) == {sizes.window}, len(messages)\nconn.close()\n"
            "print(len(sys.modules), 0, 0)\n"
        )
        if cl is not None and found.get(f"cl-sqlite@{big}", Outcome(na="x")).ok:
            children["cl-sqlite"] = (cl, [sys.executable, "-c", cl_code], "")
        elif cl is not None:
            children["cl-sqlite"] = (cl, None, "restore_window on SQLite did not run")
        if rawspec is not None and found.get(f"raw-sqlite@{big}", Outcome(na="x")).ok:
            children["raw-sqlite"] = (rawspec, [sys.executable, "-c", raw_code], "")
        children["python"] = (None, [sys.executable, "-c", "import sys; print(len(sys.modules), 0, 0)"], "")
        # The floor of any library whose records are pydantic models: pydantic imported and
        # one model class defined (its schema deferred, as the library defers its own).
        floor = PYDANTIC_FLOOR + "import sys\nprint(len(sys.modules), 0, 0)\n"
        children["pydantic"] = (None, [sys.executable, "-c", floor], "")
        outcomes = {name: Outcome(na=why or None) for name, (_, argv, why) in children.items()}
        # An installed package has its bytecode compiled (pip does it); with
        # PYTHONDONTWRITEBYTECODE inherited from the caller, every child would compile the
        # package's modules from source again, and the warm-up round could not warm anything.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for r in range(1 + sizes.fresh_rounds):
            for name, (_, argv, _) in children.items() if r % 2 else reversed(children.items()):
                if argv is None or outcomes[name].na:
                    continue
                # The child's CPU, user and system: what it spent between start and exit.
                cpu0 = _children_cpu()
                t0 = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
                elapsed = time.perf_counter() - t0
                cpu = _children_cpu() - cpu0
                if done.returncode != 0:
                    outcomes[name].na = "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:300]
                elif r:  # the first round warms the page cache and the bytecode caches
                    outcomes[name].samples.append(elapsed)
                    outcomes[name].cpu.append(cpu)
                    modules, alembic, typer = [*done.stdout.split(), "0", "0", "0"][:3]
                    outcomes[name].info = {
                        "modules": int(modules),
                        "alembic": bool(int(alembic)),
                        "typer": bool(int(typer)),
                    }
        for name, outcome in outcomes.items():
            self.run.put("fresh_restore", name, outcome)
        print("fresh_restore: done", file=sys.stderr, flush=True)

    def restore_wide(self) -> None:
        sizes = self.run.sizes
        params = {"entries": sizes.wide, "active": sizes.wide}
        lanes = [
            self.open("restore_wide", s, s.key, {**params, "session": f"wide-{s.key}"}, self.workdir / "wide" / s.key)
            for s in self.run.specs
        ]
        self.interleave(lanes, warmup=2, rounds=sizes.wide_rounds)
        self.finish("restore_wide", lanes)

    def reduction(self) -> None:
        sizes = self.run.sizes
        lanes = []
        for spec in self.run.specs:
            for entries in sizes.reduction:
                # The conversations restore_window loaded (same files, servers and sessions).
                params = {"session": f"window-{entries}", "entries": entries, "active": sizes.window}
                lanes.append(self.open("reduction", spec, f"{spec.key}@{entries}", params, self.workdir / "window"))
        self.interleave(lanes, warmup=3, rounds=sizes.reduction_rounds)
        self.finish("reduction", lanes)

    def storage(self) -> None:
        lanes = []
        for spec in self.run.specs:
            for turns in self.run.sizes.storage:
                directory = self.workdir / "storage" / f"{spec.key}-{turns}"
                lane = self.open(
                    "storage", spec, f"{spec.key}@{turns}", {"session": "storage", "turns": turns}, directory
                )
                if lane.worker is not None:
                    reply = lane.worker.request(op="measure")
                    if "na" in reply:
                        lane.outcome.na = reply["na"]
                    else:
                        lane.outcome.value = reply["value"]
                lanes.append(lane)
        self.finish("storage", lanes)

    def before_model_call(self) -> None:
        sizes = self.run.sizes
        # Two lanes per contextledger store: the count committed by the call itself (the
        # default, durable at once), and deferred to the host's next commit (defer_count).
        modes = {"contextledger": ((False, ""), (True, DEFERRED))}
        lanes = [
            self.open(
                "before_model_call",
                s,
                s.key + suffix,
                {"session": f"bmc{suffix}", "batch": sizes.bmc_batch, "defer": defer},
                self.workdir / "bmc" / s.key,
            )
            for s in self.run.specs
            for defer, suffix in modes.get(s.group, ((False, ""),))
        ]
        self.interleave(lanes, warmup=1, rounds=sizes.bmc_rounds)
        self.finish("before_model_call", lanes)

    def concurrency(self) -> None:
        sizes = self.run.sizes
        for spec in self.run.specs:
            for k in sizes.ks:
                name = f"{spec.key}@{k}"
                workers = []
                outcome = Outcome()
                for i in range(k):
                    lane = self.open(
                        "concurrency",
                        spec,
                        name,
                        {"session": f"conc-{k}-{i}-{uuid.uuid4().hex[:6]}"},
                        self.workdir / "conc" / spec.key,
                    )
                    if lane.worker is None:
                        outcome = lane.outcome
                        break
                    workers.append(lane.worker)
                if outcome.ok and workers:
                    for w in workers:  # warm up connections and prepared statements
                        for n in range(5):
                            w.request(op="step", n=n)
                    start = time.time() + 0.3
                    for w in workers:
                        assert w.process is not None and w.process.stdin is not None
                        w.process.stdin.write(
                            json.dumps({"op": "burst", "seconds": sizes.burst, "start": start}) + "\n"
                        )
                        w.process.stdin.flush()
                    counts, cpus = [], []
                    for w in workers:
                        assert w.process is not None and w.process.stdout is not None
                        reply = json.loads(w.process.stdout.readline() or '{"na": "worker exited"}')
                        if "count" not in reply:
                            outcome.na = str(reply.get("na") or reply.get("error"))[:300]
                        counts.append(int(reply.get("count", 0)))
                        cpus.append(float(reply.get("cpu") or 0.0))
                    outcome.value = sum(counts) / sizes.burst
                    outcome.info = {
                        "per_process": [c / sizes.burst for c in counts],
                        "cpu_per_append": sum(cpus) / sum(counts) if sum(counts) else None,
                    }
                for w in workers:
                    w.close()
                self.run.put("concurrency", name, outcome)
                if not outcome.ok:
                    break
        print("concurrency: done", file=sys.stderr, flush=True)

    def strands_turn(self) -> None:
        script = HERE / "strands_turn.py"
        if not script.exists():
            self.run.put("strands_turn", "strands", Outcome(na="benchmarks/strands_turn.py is not there yet"))
            return
        argv = [sys.executable, str(script), *(["--quick"] if self.run.quick else [])]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
            self.run.put("strands_turn", "strands", Outcome(na=f"failed: {why}"))
        else:
            self.run.put("strands_turn", "strands", Outcome(value=done.stdout))
        print("strands_turn: done", file=sys.stderr, flush=True)

    def _server_env(self) -> dict[str, str]:
        """This process's environment with the run's servers, for a script that takes them from there."""
        env = dict(os.environ)
        if self.run.servers.get("postgres"):
            env["CONTEXTLEDGER_TEST_POSTGRES_URL"] = str(self.run.servers["postgres"])
        if self.run.servers.get("redis"):
            env["CONTEXTLEDGER_TEST_REDIS_URL"] = str(self.run.servers["redis"])
        return env

    def aio(self) -> None:
        """``benchmarks/aio.py``: the async API against the sync one and 0.2's bridge, on the run's servers."""
        figures = self.workdir / "aio.json"
        env = self._server_env()
        argv = [sys.executable, str(HERE / "aio.py"), "--json", str(figures), *(["--quick"] if self.run.quick else [])]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600, env=env)
        if done.returncode != 0 or not figures.exists():
            why = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
            self.run.put("aio", "aio", Outcome(na=f"failed: {why}"))
        else:
            self.run.put("aio", "aio", Outcome(value=done.stdout, info=json.loads(figures.read_text())))
        print("aio: done", file=sys.stderr, flush=True)

    def floor(self) -> None:
        """``floor.py`` and ``driver_calls.py``: the append against its own statements replayed, on the run's servers.

        Their figures (JSON lines) are kept whole: the report takes from the first each
        engine's append against its statements replayed (a target), and shows the
        second's writer of the same rows by hand next to it (see ``_floor_report``).
        """
        figures: dict[str, list[dict[str, Any]]] = {}
        for script, turns in (
            ("floor.py", 60 if self.run.quick else 400),
            ("driver_calls.py", 60 if self.run.quick else 600),
        ):
            argv = [sys.executable, str(HERE / script), "--json", "--turns", str(turns)]
            done = subprocess.run(
                argv, capture_output=True, text=True, check=False, timeout=1800, env=self._server_env()
            )
            if done.returncode != 0:
                why = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
                self.run.put("floor", "floor", Outcome(na=f"failed: {script}: {why}"))
                return
            figures[script] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        self.run.put("floor", "floor", Outcome(value=len(figures["floor.py"]), info=figures))
        print("floor: done", file=sys.stderr, flush=True)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _dist(requirement: str) -> str:
    return requirement.split("[", 1)[0].split("=", 1)[0].split(">", 1)[0]


def own_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    import contextledger

    # The package's own version, from the sources measured (installed metadata may be stale).
    out = {"contextledger": contextledger.__version__}
    for name in ("sqlalchemy", "alembic", "pydantic", "psycopg", "redis", "matplotlib"):
        with suppress(PackageNotFoundError):
            out[name] = version(name)
    import sqlite3

    out["SQLite"] = sqlite3.sqlite_version
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions")
    parser.add_argument("--contenders", default="all", help="all, or groups/keys: contextledger,raw,peer,cl-sqlite,...")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=",".join(WORKLOADS))
    parser.add_argument("--no-install", action="store_true", help="do not create the peers' environments")
    parser.add_argument("--out", type=Path, default=HERE, help="where RESULTS.md, results.json and the plots go")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")
    try:
        specs = select(args.contenders)
    except ValueError as exc:
        parser.error(str(exc))
    # A background run may only get SIGTERM: exit through the cleanup (servers stopped by pid).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run = Run(args.quick, Sizes.of(args.quick), specs, versions=own_versions())
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="contextledger-bench-"))
    try:
        with ExitStack() as stack:
            needs = {s.engine for s in specs}
            if "postgres" in needs:
                url, info, default_url = stack.enter_context(postgres(stack))
                run.servers["postgres"], run.server_info["postgres"] = url, info
                run.servers["postgres@default"] = default_url
            if "redis" in needs:
                run.servers["redis"], run.server_info["redis"] = redis(stack)
            harness = Harness(run, workdir, install=not args.no_install)
            for workload in WORKLOADS:
                if workload in workloads:
                    began = time.perf_counter()
                    getattr(harness, workload)()
                    run.timings[workload] = time.perf_counter() - began
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    run.seconds = time.perf_counter() - started
    run.load = (load_before, os.getloadavg()[0])

    from _report import write_report

    write_report(run, args.out, plots=not args.no_plots)
    print(f"wrote {args.out / 'RESULTS.md'} in {run.seconds:.0f}s", file=sys.stderr)
    if args.out.resolve() == HERE and not args.quick:
        # A full run into benchmarks/ owns the figures the README and the docs state.
        from _docs import rewrite

        for page in rewrite(run, Path(ROOT)):
            print(f"rewrote the measured figures of {page}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
