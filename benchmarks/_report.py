"""RESULTS.md, results.json and the plots of one harness run."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _cells import contender_label, figure, per_clock, times
from _contenders import DEFERRED, HAND_WRITTEN, HOST_PAIRS, SCOPE
from _floor_report import floor_tables, floor_targets
from _protocol import MESSAGES_PER_TURN
from _run import POSTGRES_SETTINGS, SQLITE_DURABILITY, Run, machine
from _workers import Outcome

PLOTS = ("history.png", "concurrency.png", "append.png")


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def p95(samples: Sequence[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1] if len(samples) > 1 else samples[0]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def _get(run: Run, workload: str, lane: str) -> Outcome | None:
    found = run.results.get(workload, {}).get(lane)
    return None if found is not None and found.na in SCOPE else found


def _med(run: Run, workload: str, lane: str) -> float | None:
    found = _get(run, workload, lane)
    return median(found.samples) if found is not None and found.ok and found.samples else None


def _cpu(run: Run, workload: str, lane: str) -> float | None:
    """Median client CPU seconds of a lane's repetitions (``None``: not recorded)."""
    found = _get(run, workload, lane)
    return median(found.cpu) if found is not None and found.ok and found.cpu else None


def _ours(run: Run, key: str) -> str:
    """The contextledger lane a peer's append is compared with: the same engine at the same setting."""
    spec = next((s for s in run.specs if s.key == key), None)
    if spec is None:
        return "cl-sqlite"
    if spec.engine == "postgres":
        return "cl-postgres-default" if spec.variant == "default" else "cl-postgres"
    if spec.engine == "redis":
        return "cl-redis"
    # SQLite, files, memory: contextledger's SQLite default (WAL, synchronous=NORMAL).
    return "cl-sqlite"


def _raw(spec: Any) -> str:
    return f"raw-{spec.engine}" + ("-default" if spec.variant == "default" else "")


def _na(outcome: Outcome | None) -> str:
    if outcome is None:
        return "n/a: not run"
    return f"n/a: {outcome.na}" if outcome.na and not outcome.na.startswith("n/a") else str(outcome.na)


BMC_LANES = ("cl-memory", f"cl-memory{DEFERRED}", "cl-sqlite", f"cl-sqlite{DEFERRED}")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


# -- the targets -------------------------------------------------------------------------


def targets(run: Run) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) for each target the run measured."""
    out: list[tuple[str, str, str]] = []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("met" if ok else "**missed**")

    if "append" in run.results:
        for lane in ("cl-sqlite", "cl-postgres", "cl-postgres-default", "cl-redis"):
            spec = next((s for s in run.specs if s.key == lane), None)
            if spec is None:
                continue
            raw = _raw(spec)
            r = _ratio(_med(run, "append", lane), _med(run, "append", raw))
            c = _ratio(_cpu(run, "append", lane), _cpu(run, "append", raw))
            out.append(
                (
                    f"append, {spec.label}: within 2x of the raw driver at the same setting",
                    f"wall {times(r)} ({_ms(_med(run, 'append', lane))} vs {_ms(_med(run, 'append', raw))} ms), "
                    f"client CPU {times(c)} ({_ms(_cpu(run, 'append', lane))} vs {_ms(_cpu(run, 'append', raw))} ms)",
                    per_clock(verdict, r, c, lambda v: v <= 2),
                )
            )
        out += _peer_targets(run, verdict)
        cl = _med(run, "append", "cl-sqlite")
        for peer, factor in (("strands-file", 3), ("adk", 10)):
            other = _med(run, "append", peer)
            r = _ratio(other, cl)
            out.append(
                (
                    f"append msgs/s vs {contender_label(run, peer)}: at least {factor}x",
                    times(r),
                    verdict(None if r is None else r >= factor),
                )
            )
    reads = f"reads {run.sizes.wide:,} messages back"
    for ours, theirs, how in HOST_PAIRS:
        for workload, what in (("append", "appends a turn"), ("restore_wide", reads)):
            if workload in run.results and (_get(run, workload, ours) or _get(run, workload, theirs)):
                r = _ratio(_med(run, workload, theirs), _med(run, workload, ours))
                read = f" ({how})" if workload == "restore_wide" else ""
                out.append(
                    (
                        f"{contender_label(run, ours)} {what} x faster than {contender_label(run, theirs)}{read}",
                        times(r),
                        "-",
                    )
                )
    if "fresh_restore" in run.results:
        cl = _med(run, "fresh_restore", "cl-sqlite")
        out.append(
            (
                f"fresh-process restore of {run.sizes.window} over {run.sizes.history[-1]:,} entries "
                "(SQLite): under 150 ms",
                f"{_ms(cl)} ms",
                verdict(None if cl is None else cl < 0.150),
            )
        )
        floor = _med(run, "fresh_restore", "pydantic")
        if cl is not None and floor is not None:
            out.append(
                (
                    "fresh-process restore, what contextledger adds to a process that defines one pydantic model",
                    f"{_ms(cl - floor)} ms ({_ms(floor)} ms floor)",
                    "-",
                )
            )
    if "restore_window" in run.results:
        big, small = run.sizes.history[-1], run.sizes.history[0]
        for engine in ("sqlite", "postgres", "redis"):
            r = _ratio(
                _med(run, "restore_window", f"cl-{engine}@{big}"), _med(run, "restore_window", f"cl-{engine}@{small}")
            )
            out.append(
                (
                    f"in-process restore, {engine}: {run.sizes.window} active over {big:,} vs {small} in all "
                    "within 1.5x",
                    times(r),
                    verdict(None if r is None else r <= 1.5),
                )
            )
    if "restore_wide" in run.results:
        r = _ratio(_med(run, "restore_wide", "strands-file"), _med(run, "restore_wide", "cl-sqlite"))
        out.append(
            (
                f"restore of {run.sizes.wide:,} active messages: at least 10x faster than FileSessionManager",
                times(r),
                verdict(None if r is None else r >= 10),
            )
        )
    if "reduction" in run.results:
        big, small = run.sizes.reduction[-1], run.sizes.reduction[0]
        for engine in ("sqlite", "postgres", "redis"):
            r = _ratio(_med(run, "reduction", f"cl-{engine}@{big}"), _med(run, "reduction", f"cl-{engine}@{small}"))
            out.append(
                (
                    f"reduction commit, {engine}: {big:,} vs {small:,} entries within 1.5x",
                    times(r),
                    verdict(None if r is None else r <= 1.5),
                )
            )
    if "storage" in run.results:
        hi, lo = run.sizes.storage[-1], run.sizes.storage[-2]
        for key in ("cl-sqlite", "langgraph-sqlite"):
            a, b = _get(run, "storage", f"{key}@{hi}"), _get(run, "storage", f"{key}@{lo}")
            r = a.value / b.value if a and b and a.ok and b.ok and b.value else None
            target = "<= 2.1" if key == "cl-sqlite" else "for comparison"
            out.append(
                (
                    f"storage, {contender_label(run, key)}: bytes at {hi} / {lo} turns {target}",
                    figure(r),
                    verdict(None if r is None else r <= 2.1) if key == "cl-sqlite" else "-",
                )
            )
    if "before_model_call" in run.results:
        for key in BMC_LANES:
            t = _med(run, "before_model_call", key)
            out.append(
                (
                    f"before_model_call() when nothing fires, {contender_label(run, key)}: under 20 us",
                    figure(None if t is None else t * 1e6, 1, " us"),
                    verdict(None if t is None else t < 20e-6),
                )
            )
    if "concurrency" in run.results:
        for key in ("cl-postgres", "cl-redis"):
            curve = [(k, _get(run, "concurrency", f"{key}@{k}")) for k in run.sizes.ks]
            values = [(k, o.value) for k, o in curve if o is not None and o.ok]
            shown = ", ".join(f"K={k}: {v:,.0f}" for k, v in values) or "n/a"
            grows = len(values) > 1 and values[1][1] > values[0][1]
            out.append(
                (
                    f"concurrency, {contender_label(run, key)}: appends/s grow with K up to the cores",
                    shown,
                    verdict(None if len(values) < 2 else grows),
                )
            )
    aio = _get(run, "aio", "aio")
    if aio is not None and aio.ok:
        out += _aio_targets(aio.info.get("figures", {}), verdict)
    replayed = _get(run, "floor", "floor")
    if replayed is not None and replayed.ok:
        out += floor_targets(run, replayed.info, verdict)
    return out


def _peer_targets(run: Run, verdict: Callable[[bool | None], str]) -> list[tuple[str, str, str]]:
    """Ahead of each peer on append: contextledger on the same engine at the same setting.

    A ratio above 1 means contextledger takes less time per turn (wall, and client CPU).
    """
    out: list[tuple[str, str, str]] = []
    for spec in run.specs:
        if spec.group != "peer" or spec.engine == "memory" or _get(run, "append", spec.key) is None:
            continue
        ours = _ours(run, spec.key)
        r = _ratio(_med(run, "append", spec.key), _med(run, "append", ours))
        c = _ratio(_cpu(run, "append", spec.key), _cpu(run, "append", ours))
        at = "its default" if spec.variant == "default" else "equal durability"
        base = spec.label.removesuffix(", its default")
        if spec.key in HAND_WRITTEN:  # a floor written with the bare driver, not a library's store: no target
            out.append(
                (
                    f"{contender_label(run, ours)} against {base}, a floor written by hand with the driver "
                    f"({spec.durability}): how many times faster",
                    f"wall {times(r)}, client CPU {times(c)}",
                    "-",
                )
            )
            continue
        out.append(
            (
                f"ahead of {base} on append at {at} ({spec.durability}) -- against {contender_label(run, ours)}",
                f"wall {times(r)}, client CPU {times(c)}",
                per_clock(verdict, r, c, lambda v: v > 1),
            )
        )
    return out


def _aio_targets(
    figures: dict[str, dict[str, float]], verdict: Callable[[bool | None], str]
) -> list[tuple[str, str, str]]:
    """The async API's targets, from ``benchmarks/aio.py``'s figures."""
    out: list[tuple[str, str, str]] = []
    for engine in ("sqlite", "postgres", "redis"):
        f = figures.get(engine, {})
        hops = f.get("append async hops")
        if hops is not None:
            label = f"async append, {engine}: at most one worker hop per commit (none inline)"
            out.append((label, f"{hops:.2f}", verdict(hops <= 1.0)))
        sync, aio = f.get("append sync cpu"), f.get("append async cpu")
        r = _ratio(aio, sync)
        shown = (
            "n/a"
            if r is None or sync is None or aio is None
            else f"{times(r)} ({aio * 1e6:,.0f} vs {sync * 1e6:,.0f} us)"
        )
        out.append(
            (
                f"async append, {engine}: CPU within 1.2x of the sync API's",
                shown,
                verdict(None if r is None else r <= 1.2),
            )
        )
    for engine in ("postgres", "redis", "sqlite"):
        f = figures.get(engine, {})
        r = _ratio(f.get("many async tasks msg/s"), f.get("many sync threads msg/s"))
        out.append(
            (
                f"concurrent AsyncConversations, {engine}: at least the msg/s of as many threads on the sync API",
                times(r),
                verdict(None if r is None else r >= 1.0) if engine != "sqlite" else "-",
            )
        )
    return out


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else ms(seconds)


# -- tables ------------------------------------------------------------------------------


def _cpu_cell(o: Outcome) -> str:
    return ms(median(o.cpu)) if o.cpu else "n/a"


def _timed_row(run: Run, workload: str, lane: str, label: str, extra: list[str]) -> str:
    """``| label | median wall | p95 wall | median client CPU | extra... |``."""
    o = _get(run, workload, lane)
    if o is None or not o.ok or not o.samples:
        return f"| {label} | {_na(o)} |" + " |" * (2 + len(extra))
    cells = [ms(median(o.samples)), ms(p95(o.samples)), _cpu_cell(o), *extra]
    return f"| {label} | " + " | ".join(cells) + " |"


def _pair(wall: float | None, cpu: float | None, digits: int = 2) -> str:
    return f"{figure(wall, digits, 'x')} / {figure(cpu, digits, 'x')}"


def append_table(run: Run) -> list[str]:
    lines = [
        "| contender | durability | median ms / turn | p95 ms | client CPU ms / turn | messages/s "
        "| vs raw driver, same setting: wall / CPU | contextledger, same engine and setting, is x faster: wall / CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for spec in run.specs:
        if _get(run, "append", spec.key) is None:
            continue
        t, c = _med(run, "append", spec.key), _cpu(run, "append", spec.key)
        raw = _raw(spec)
        vs_raw = (
            _pair(_ratio(t, _med(run, "append", raw)), _ratio(c, _cpu(run, "append", raw)))
            if spec.group == "contextledger"
            else "-"
        )
        ours = _ours(run, spec.key)
        faster = (
            _pair(_ratio(t, _med(run, "append", ours)), _ratio(c, _cpu(run, "append", ours)), 1)
            if spec.group == "peer"
            else "-"
        )
        rate = f"{MESSAGES_PER_TURN / t:,.0f}" if t else "n/a"
        o = _get(run, "append", spec.key)
        if o is None or not o.ok or not o.samples:
            lines.append(f"| {spec.label} | {spec.durability} | {_na(o)} |" + " |" * 5)
            continue
        cells = [ms(median(o.samples)), ms(p95(o.samples)), _cpu_cell(o), rate, vs_raw, faster]
        lines.append(f"| {spec.label} | {spec.durability} | " + " | ".join(cells) + " |")
    return lines


def durability_table(run: Run) -> list[str]:
    """Every contender's durability settings, and what the servers report."""
    lines = ["| contender | durability settings |", "|---|---|"]
    lines += [f"| {spec.label} | {spec.durability or 'not stated'} |" for spec in run.specs]
    return lines


def sized_table(run: Run, workload: str, sizes: list[int], unit: str) -> list[str]:
    head = " | ".join(f"{n:,} {unit}: median ms | p95 | CPU ms" for n in sizes)
    lines = [f"| contender | {head} | ratio largest/smallest |", "|---" * (2 + 3 * len(sizes)) + "|"]
    for spec in run.specs:
        outcomes = [_get(run, workload, f"{spec.key}@{n}") for n in sizes]
        if not any(o is not None for o in outcomes):
            continue
        if not all(o is not None and o.ok and o.samples for o in outcomes):
            bad = next((o for o in outcomes if o is None or not o.ok), None)
            lines.append(f"| {spec.label} | {_na(bad)} |" + " |" * (3 * len(sizes)))
            continue
        cells = [f"{ms(median(o.samples))} | {ms(p95(o.samples))} | {_cpu_cell(o)}" for o in outcomes if o is not None]
        first, last = outcomes[0], outcomes[-1]
        assert first is not None and last is not None
        lines.append(
            f"| {spec.label} | " + " | ".join(cells) + f" | {median(last.samples) / median(first.samples):.2f} |"
        )
    return lines


def wide_table(run: Run) -> list[str]:
    lines = [
        "contextledger's own rows restore from the store each time (`ledger.conversation(...)` on a ledger"
        " without shared views); the rows behind a host's interface read as that host does, a new object"
        " each time on one ledger with its shared views on (the default: the view its conversations last"
        " held, taken when the stored state says nothing moved).",
        "",
        "| contender | median ms | p95 ms | client CPU ms | x slower than contextledger (SQLite): wall / CPU |",
        "|---|---|---|---|---|",
    ]
    cl, cl_cpu = _med(run, "restore_wide", "cl-sqlite"), _cpu(run, "restore_wide", "cl-sqlite")
    for spec in run.specs:
        if _get(run, "restore_wide", spec.key) is None:
            continue
        t, c = _med(run, "restore_wide", spec.key), _cpu(run, "restore_wide", spec.key)
        lines.append(
            _timed_row(run, "restore_wide", spec.key, spec.label, [_pair(_ratio(t, cl), _ratio(c, cl_cpu), 1)])
        )
    return lines


def fresh_table(run: Run) -> list[str]:
    labels = {
        "cl-sqlite": "contextledger (SQLite): import, connect, open, read",
        "raw-sqlite": "python + sqlite3 reading the same window",
        "pydantic": "python + pydantic, one model class defined (the floor of a library built on pydantic models)",
        "python": "python -c pass (interpreter start)",
    }
    lines = [
        "| child process | median ms | p95 ms | CPU ms (the child's, user + system) | modules imported "
        "| Alembic imported | CLI (typer) imported |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label in labels.items():
        o = _get(run, "fresh_restore", key)
        info = o.info if o is not None else {}
        lines.append(
            _timed_row(
                run,
                "fresh_restore",
                key,
                label,
                [str(info.get("modules", "-")), str(info.get("alembic", "-")), str(info.get("typer", "-"))],
            )
        )
    return lines


def storage_table(run: Run) -> list[str]:
    turns = run.sizes.storage
    head = " | ".join(f"{t} turns" for t in turns)
    lines = [
        f"| contender | {head} | bytes/turn (last) | ratio {turns[-1]}/{turns[-2]} |",
        "|---" * (3 + len(turns)) + "|",
    ]
    for spec in run.specs:
        outs = [_get(run, "storage", f"{spec.key}@{t}") for t in turns]
        if not all(o is not None for o in outs):
            continue
        if not all(o is not None and o.ok for o in outs):
            bad = next(o for o in outs if o is None or not o.ok)
            lines.append(f"| {spec.label} | {_na(bad)} |" + " |" * (1 + len(turns)))
            continue
        values = [int(o.value) for o in outs if o is not None]
        per_turn = (values[-1] - values[-2]) / (turns[-1] - turns[-2])
        lines.append(
            f"| {spec.label} | "
            + " | ".join(f"{v:,}" for v in values)
            + f" | {per_turn:,.0f} | {values[-1] / values[-2]:.2f} |"
        )
    return lines


def bmc_table(run: Run) -> list[str]:
    lines = [
        "Two ways to count a model call: by default `before_model_call()` commits the new count "
        "itself (durable at once: one store commit per call); with `defer_count=True` (what the "
        "Strands integration uses) the count waits for the host's next commit -- the model's "
        "answer -- so nothing is written when nothing fires, and a crash during the model call "
        "loses that call's count together with its answer.",
        "",
        "| contender | median us / call | p95 us | client CPU us / call |",
        "|---|---|---|---|",
    ]
    for key in BMC_LANES:
        o = _get(run, "before_model_call", key)
        if o is None:
            continue
        if not o.ok or not o.samples:
            lines.append(f"| {contender_label(run, key)} | {_na(o)} | | |")
        else:
            cpu = f"{median(o.cpu) * 1e6:.1f}" if o.cpu else "n/a"
            lines.append(
                f"| {contender_label(run, key)} | {median(o.samples) * 1e6:.1f} | {p95(o.samples) * 1e6:.1f} | {cpu} |"
            )
    return lines


def concurrency_table(run: Run) -> list[str]:
    ks = run.sizes.ks
    lines = [
        f"| contender | {' | '.join(f'K={k}' for k in ks)} | K={ks[-1]} / K=1 "
        f"| client CPU ms per append at K={ks[-1]} (all processes) |",
        "|---" * (3 + len(ks)) + "|",
    ]
    for spec in run.specs:
        outs = [_get(run, "concurrency", f"{spec.key}@{k}") for k in ks]
        if outs[0] is None:
            continue
        if not outs[0].ok:
            lines.append(f"| {spec.label} | {_na(outs[0])} |" + " |" * (1 + len(ks)))
            continue
        cells = [f"{o.value:,.0f}" if o is not None and o.ok else _na(o) for o in outs]
        last = outs[-1]
        scale = f"{last.value / outs[0].value:.2f}" if last is not None and last.ok and outs[0].value else "n/a"
        per = last.info.get("cpu_per_append") if last is not None and last.ok else None
        lines.append(f"| {spec.label} | " + " | ".join(cells) + f" | {scale} | {_ms(per)} |")
    return lines


def na_table(run: Run) -> list[str]:
    """Every contender that did not run a workload, with the reason."""
    lines = ["| contender | workload | why not |", "|---|---|---|"]
    for workload, lanes in run.results.items():
        seen: set[tuple[str, str]] = set()
        for lane, outcome in lanes.items():
            key = lane.split("@", 1)[0]
            if (
                outcome.na
                and outcome.na not in SCOPE
                and (key, workload) not in seen
                and key in {s.key for s in run.specs}
            ):
                seen.add((key, workload))
                lines.append(f"| {contender_label(run, key)} | {workload} | {outcome.na.removeprefix('n/a: ')} |")
    return lines


# -- the document ------------------------------------------------------------------------


def write_report(run: Run, out: Path, *, plots: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    m = machine()
    s = run.sizes
    doc: list[str] = [
        "# Benchmark results",
        "",
        "Written by `scripts/bench`" + (" --quick" if run.quick else "") + f" in {run.seconds:.0f} s. Every "
        "contender runs in a worker process of its own (the peers in their own virtual environments); repetitions "
        "are interleaved across contenders, the order rotated every round. Times are medians and 95th "
        "percentiles of the repetitions; a ratio is a ratio of medians. Each message is random text of a few "
        "hundred bytes (incompressible); a turn is four messages: the user's text, the assistant's toolUse, "
        "the toolResult and the assistant's answer. Message objects are built outside the timer in each "
        "contender's own types; the timer covers the library call. Every repetition records wall time and the "
        "client's CPU time (`time.process_time()` of the worker process around the same call, every thread "
        "of it; a fresh process's from `getrusage` of the child): on PostgreSQL and Redis the server's CPU is "
        "not counted, so there the CPU figure is the client library's share only.",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['os']}, Python {m['python']}; load average (1 min) "
        f"{run.load[0]:.1f} at the start, {run.load[1]:.1f} at the end (other work shares the machine: absolute "
        "times carry its noise, ratios of interleaved runs much less). Versions: "
        + ", ".join(f"{k} {v}" for k, v in sorted(run.versions.items()))
        + ".",
        "",
        f"Durability: every contender's settings are in the table below and next to each append figure. At "
        f"equal durability every contender on an engine runs SQLite {SQLITE_DURABILITY}, or the servers "
        "as they report: "
        + "; ".join(run.server_info.values())
        + f" (PostgreSQL launched with {POSTGRES_SETTINGS}). Of one class: a commit survives a crash of the "
        "process or of the server; a power loss may take the last second of commits. Where a library's own "
        "default differs, a second append row runs it as the library configures itself (on PostgreSQL: a "
        "database with PostgreSQL's default synchronous_commit=on); `set here` names each setting the "
        "harness changed from a library's default.",
        "",
        *durability_table(run),
        "",
        f"Parameters: append {s.rounds} turns each after {s.warmup} warm-up turns; restore of a {s.window}-message "
        f"window over {', '.join(f'{n:,}' for n in s.history)} entries, {s.rounds // 2} restores each; fresh-process "
        f"restore {s.fresh_rounds} processes each; restore of {s.wide:,} active messages {s.wide_rounds} times; "
        f"reduction at {', '.join(f'{n:,}' for n in s.reduction)} entries, {s.reduction_rounds} each; storage at "
        f"{', '.join(map(str, s.storage))} turns; before_model_call {s.bmc_rounds} batches of {s.bmc_batch} calls; "
        f"concurrency K = {', '.join(map(str, s.ks))} processes for {s.burst:g} s each.",
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        *(f"| {t} | {v} | {ok} |" for t, v, ok in targets(run)),
    ]
    if plots and _plots(run, out):
        doc += [
            "",
            "![cost against history length](history.png)",
            "",
            "![appends per second against processes](concurrency.png)",
            "",
            "![messages appended per second](append.png)",
        ]
    sections: list[tuple[str, str, list[str]]] = [
        (
            "append",
            "Append one turn (one durable commit)",
            [
                f"contextledger keeps a {s.window}-message window here: after each timed append the oldest turn is "
                "evicted, untimed, as a sliding window would (the cost of a wide window is in the restore tables). "
                "The raw drivers and the peers only append.",
                "",
                *append_table(run),
            ]
            if "append" in run.results
            else [],
        ),
        (
            "restore_window",
            f"Restore a {s.window}-message window in process (`ledger.conversation(...).messages`)",
            sized_table(run, "restore_window", s.history, "entries"),
        ),
        (
            "fresh_restore",
            f"Restore in a fresh process: {s.window} active over {s.history[-1]:,} entries, SQLite",
            fresh_table(run),
        ),
        ("restore_wide", f"Restore {s.wide:,} active messages", wide_table(run)),
        (
            "reduction",
            "Reduction commit (evict one turn) against history length",
            sized_table(run, "reduction", s.reduction, "entries"),
        ),
        ("storage", "Bytes on disk against turns", storage_table(run)),
        (
            "before_model_call",
            "`before_model_call()` when nothing fires (sliding window of 40, per turn)",
            bmc_table(run),
        ),
        (
            "concurrency",
            "Aggregate turns appended per second, K processes on distinct conversations",
            concurrency_table(run),
        ),
    ]
    for workload, title, table in sections:
        if workload in run.results:
            doc += ["", f"## {title}", "", *table]
    turn = _get(run, "strands_turn", "strands")
    if turn is not None:
        doc += ["", "## A Strands turn (`benchmarks/strands_turn.py`)", ""]
        # The script's output starts with its own heading: the section keeps the one above.
        body = str(turn.value).strip().split("\n")
        if body and body[0].startswith("## "):
            body = body[1:]
        doc += ["\n".join(body).strip()] if turn.ok else [_na(turn)]
    aio = _get(run, "aio", "aio")
    if aio is not None:
        doc += ["", "## The async API against the sync API and 0.2's greenlet bridge (`benchmarks/aio.py`)", ""]
        body = str(aio.value).strip().split("\n")
        start = next((i for i, line in enumerate(body) if line.startswith("**One call")), 0)
        doc += ["\n".join(body[start:]).strip()] if aio.ok else [_na(aio)]
    replayed = _get(run, "floor", "floor")
    if replayed is not None:
        doc += [
            "",
            "## The append against its own statements replayed (`benchmarks/floor.py`, `benchmarks/driver_calls.py`)",
        ]
        doc += ["", *floor_tables(replayed.info)] if replayed.ok else ["", _na(replayed)]
    doc += ["", "## Not applicable", "", *na_table(run), ""]
    (out / "RESULTS.md").write_text("\n".join(doc))
    payload = {
        "quick": run.quick,
        "sizes": asdict(s),
        "machine": m,
        "versions": run.versions,
        "servers": run.server_info,
        "contenders": {
            spec.key: {"label": spec.label, "durability": spec.durability, "variant": spec.variant}
            for spec in run.specs
        },
        "seconds": run.seconds,
        "load": run.load,
        "timings": run.timings,
        "targets": [{"target": t, "measured": v, "verdict": ok} for t, v, ok in targets(run)],
        "results": {w: {lane: asdict(o) for lane, o in lanes.items()} for w, lanes in run.results.items()},
    }
    (out / "results.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")


def _plots(run: Run, out: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = run.sizes
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    panels: list[tuple[Any, str, list[int], str, str]] = [
        (axes[0], "restore_window", s.history, f"restore a {s.window}-message window", "entries in the ledger"),
        (axes[1], "reduction", s.reduction, "reduction commit (evict one turn)", "entries in the ledger"),
    ]
    for ax, workload, sizes, title, xlabel in panels:
        for spec in run.specs:
            points = [(n, _med(run, workload, f"{spec.key}@{n}")) for n in sizes]
            xs = [n for n, t in points if t is not None]
            ys = [t * 1000 for _, t in points if t is not None]
            if xs:
                ax.plot(xs, ys, marker="o", label=spec.label)
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("median ms")
        ax.set_ylim(bottom=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    ax = axes[2]
    for spec in run.specs:
        stored = [(t, _get(run, "storage", f"{spec.key}@{t}")) for t in s.storage]
        xs = [t for t, o in stored if o is not None and o.ok]
        ys = [o.value / 1e6 for _, o in stored if o is not None and o.ok]
        if xs:
            ax.plot(xs, ys, marker="o", label=spec.label)
    ax.set_title("bytes on disk (SQLite files, Strands' JSON files)")
    ax.set_xlabel("turns (4 messages each)")
    ax.set_ylabel("MB")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "history.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for spec in run.specs:
        curve = [(k, _get(run, "concurrency", f"{spec.key}@{k}")) for k in s.ks]
        xs = [k for k, o in curve if o is not None and o.ok]
        if xs:
            ax.plot(xs, [o.value for _, o in curve if o is not None and o.ok], marker="o", label=spec.label)
    ax.set_xlabel("processes (K), distinct conversations")
    ax.set_ylabel("turns appended per second, all processes")
    ax.set_xticks(s.ks)
    ax.set_ylim(bottom=0)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.set_title("concurrency")
    fig.tight_layout()
    fig.savefig(out / "concurrency.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    rates = [(spec.label, MESSAGES_PER_TURN / t) for spec in run.specs if (t := _med(run, "append", spec.key))]
    if rates:
        ax.barh([r[0] for r in rates], [r[1] for r in rates], color="tab:blue")
        ax.set_xscale("log")
        ax.invert_yaxis()
    ax.set_xlabel("messages appended per second (median turn, log scale)")
    ax.set_title("append one turn: one durable commit")
    fig.tight_layout()
    fig.savefig(out / "append.png", dpi=90)
    plt.close(fig)
    return True
