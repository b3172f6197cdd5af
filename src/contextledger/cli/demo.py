"""``contextledger demo``: run the scripted multi-session demo and show what happened."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from contextledger.cli.errors import ExitCode, mask_secrets
from contextledger.cli.options import sqlite_path
from contextledger.cli.render import console, describe, dump_json, record_json, short, table, view_entry_json
from contextledger.demo.runner import (
    DEFAULT_DEMO_URL,
    DemoOptions,
    DemoReport,
    SessionReport,
    connect,
    run_demo,
    session_ids,
)
from contextledger.demo.scenarios import SCENARIOS
from contextledger.model.records import ViewEntry

__all__ = ["demo", "report_json"]

EVICTION_ROWS = 8
"""Evictions (and summaries) shown per session; the rest is one ``contextledger evictions`` away."""


def demo(
    url: Annotated[
        str, typer.Option("--url", "-u", help="Ledger to run on (default: a fresh SQLite file of its own).")
    ] = DEFAULT_DEMO_URL,
    turns: Annotated[
        int, typer.Option(min=2, max=500, help="User turns per session; the demo restarts half way.")
    ] = 12,
    sessions: Annotated[
        int, typer.Option(min=1, max=12, help="Sessions held at once (the scenarios are cycled).")
    ] = len(SCENARIOS),
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep earlier demo data; this run's sessions get a unique suffix.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")] = False,
) -> None:
    """Run a scripted, tool-using agent over several sessions; stop; restart from the database; report.

    Nothing leaves this machine: the model is scripted.

    By default the demo writes its own SQLite file (contextledger-demo.db), recreated on every run unless --keep.
    """
    options = DemoOptions(url=url, sessions=sessions, turns=turns, keep=keep)
    options.validate()
    path = sqlite_path(url)
    if path is not None and not keep:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    with connect(url):  # fail on a bad URL or an unreachable server before printing anything
        pass
    err = Console(stderr=True, highlight=False)
    total = options.sessions * options.turns
    if not as_json:
        console().print(
            Text.assemble(
                ("contextledger demo", "bold"),
                f": {options.sessions} session(s) × {options.turns} turns on {mask_secrets(url)}, "
                f"restart after turn {options.stop_after}",
            )
        )
    if not as_json:
        console().print(
            table(
                None,
                ["session", "agent", "scenario", "manager"],
                [(sid, sc.agent_id, sc.title, sc.policy) for sid, sc in session_ids(options)],
            )
        )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task("starting", total=total)

        def advance(phase: str, done: int) -> None:
            progress.update(task, description=phase, advance=done)

        report = run_demo(options, progress=advance)
        progress.update(task, description="done")
    if as_json:
        dump_json(report_json(report))
    else:
        render_report(report, mask_secrets(url))
    if not report.ok:
        failed = "; ".join(f"{c.name}: {c.detail}" for c in report.checks if not c.ok)
        typer.echo(f"error: demo check failed: {failed}", err=True)
        raise typer.Exit(ExitCode.ERROR)


def _summary_text(content: str) -> str:
    """The summary's first line and its newest line: what it covers up to."""
    lines = [line for line in content.splitlines() if line.strip() and not line.startswith("- ... (")]
    text = lines[0] if len(lines) < 2 else f"{lines[0]} … {lines[-1]}"
    return text if len(text) <= 200 else text[:199] + "…"


def _view_rows(entries: list[ViewEntry]) -> list[Sequence[str | Text]]:
    return [
        (str(i), str(e.seq), e.kind, e.message.role, "pinned" if e.pinned else "", str(e.tokens), describe(e.message))
        for i, e in enumerate(entries)
    ]


def render_report(report: DemoReport, url: str) -> None:
    """Print the report as rich tables; ``url`` is the ledger URL shown in the next steps."""
    out = console()
    stop = report.options.stop_after
    interrupted = [s.session_id for s in report.sessions if s.repaired is not None]
    out.print()
    out.print(
        Text(
            f"Stopped after turn {stop}"
            + (f" with {', '.join(interrupted)} in the middle of a tool call" if interrupted else "")
            + f"; closed the ledger, opened {url} again and restored "
            f"{len(report.sessions)} session(s) from the database alone."
        )
    )
    rows: list[Sequence[str | Text]] = [
        (
            s.session_id,
            str(len(s.restored)),
            str(sum(e.pinned for e in s.restored)),
            f"{s.state_before_stop.model_call_count} → {s.restored_state.model_call_count}",
            Text("yes", style="green") if s.identical else Text("NO", style="bold red"),
            "interrupted tool call answered" if s.repaired else "",
        )
        for s in report.sessions
    ]
    columns = ["session", "entries", "pinned", "model_call_count", "identical", "repair"]
    out.print(table("Restored sessions: view before the stop vs. view read back", columns, rows))
    for s in report.sessions:
        title = (
            f"Restored context of {s.session_id} ({s.agent_id}, model_call_count {s.restored_state.model_call_count})"
        )
        out.print(table(title, ["#", "seq", "kind", "role", "pin", "tokens", "content"], _view_rows(s.restored)))

    out.print()
    out.print(f"Continued to turn {report.options.turns}. What the ledger recorded:")
    rows = []
    for s in report.sessions:
        triggers = Counter(r.trigger for r in s.reductions)
        rows.append(
            (
                s.session_id,
                str(s.model_call_count),
                str(s.overflows),
                ", ".join(f"{t} {n}" for t, n in sorted(triggers.items())) or "-",
                str(len(s.evictions)),
                str(len(s.summaries)),
                f"{len(s.final)}/{s.history_size + len(s.summaries)}",
            )
        )
    columns = ["session", "model_call_count", "overflows", "reductions", "evicted", "summaries", "active/total"]
    out.print(table(f"Sessions after {report.options.turns} turns", columns, rows))
    for s in report.sessions:
        shown = s.evictions[-EVICTION_ROWS:]
        rows = [
            (
                e.evicted_at.strftime("%H:%M:%S"),
                str(e.seq),
                e.kind,
                e.role,
                e.trigger,
                e.strategy,
                short(e.replaced_by_summary) if e.replaced_by_summary else "",
                e.preview,
            )
            for e in shown
        ]
        title = f"Eviction history of {s.session_id}: {len(s.evictions)} evicted"
        title += f", the last {len(shown)} shown" if len(shown) < len(s.evictions) else ""
        columns = ["when", "seq", "kind", "role", "trigger", "strategy", "summary", "content"]
        out.print(table(title, columns, rows))
    summary_rows: list[Sequence[str | Text]] = []
    for s in report.sessions:
        shown_summaries = s.summaries[-EVICTION_ROWS:]
        summary_rows += [
            (
                s.session_id,
                short(m.summary_id),
                f"superseded by {short(m.superseded_by)}" if m.superseded_by else m.status,
                str(len(m.replaces)),
                m.summarizer,
                _summary_text(m.content),
            )
            for m in shown_summaries
        ]
    if summary_rows:
        columns = ["session", "id", "status", "replaces", "summarizer", "content"]
        out.print(table("Summaries (each replaces older entries and the summary before it)", columns, summary_rows))
    out.print()
    for check in report.checks:
        mark = Text("✓", style="green") if check.ok else Text("✗", style="bold red")
        out.print(mark, Text(f"{check.name}: {check.detail}"))
    out.print(f"\nDone in {report.seconds:.1f}s. Look around with the inspector:")
    first = report.sessions[0].session_id if report.sessions else "SESSION"
    flag = f" --url {url}"
    for command in (
        f"contextledger sessions{flag}",
        f"contextledger show {first}{flag}",
        f"contextledger evictions {first}{flag}",
        f"contextledger history {first}{flag}",
    ):
        out.print(f"  {command}", soft_wrap=True, markup=False, highlight=False)
    out.print("In a browser (the web view needs pip install 'contextledger[web]'):", markup=False, highlight=False)
    for command in (
        f"contextledger serve{flag}",
        f"contextledger timeline {first}{flag} -o {first}.html",
    ):
        out.print(f"  {command}", soft_wrap=True, markup=False, highlight=False)


def _session_json(s: SessionReport) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "agent_id": s.agent_id,
        "scenario": s.scenario.name,
        "manager": s.scenario.policy,
        "stopped_after_turn": s.stopped_after_turn,
        "restored": {
            "identical": s.identical,
            "model_call_count_before_stop": s.state_before_stop.model_call_count,
            "model_call_count": s.restored_state.model_call_count,
            "version": s.restored_state.version,
            "entries": [view_entry_json(e) for e in s.restored],
            "repair": record_json(s.repaired) if s.repaired else None,
        },
        "final": {
            "model_call_count": s.model_call_count,
            "version": s.state.version,
            "entries": [view_entry_json(e) for e in s.final],
        },
        "model_calls": s.model_calls,
        "overflows": s.overflows,
        "tool_calls": s.tool_calls,
        "history_size": s.history_size,
        "evictions": [record_json(e) for e in s.evictions],
        "summaries": [record_json(m) for m in s.summaries],
        "reductions": [record_json(r) for r in s.reductions],
    }


def report_json(report: DemoReport) -> dict[str, Any]:
    """The report as one JSON document."""
    return {
        "url": report.url,
        "sessions_count": report.options.sessions,
        "turns": report.options.turns,
        "stop_after": report.options.stop_after,
        "ok": report.ok,
        "seconds": round(report.seconds, 3),
        "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks],
        "sessions": [_session_json(s) for s in report.sessions],
    }
