"""The workers' side of the harness: a JSON-lines protocol and the workload's messages.

Standard library only: this module is imported by workers running in the peers' own
virtual environments, where neither contextledger nor its dependencies are installed.

A worker is ``python benchmarks/worker.py CONTENDER``. It reads one JSON object per
line on stdin and answers each with one JSON object per line on stdout:

* ``{"op": "setup", "workload": W, "params": {...}}`` -> ``{"ok": true, "info": {...}}``,
  or ``{"na": "reason"}`` when the contender cannot do the workload.
* ``{"op": "step", "n": N}`` -> ``{"t": seconds, "cpu": seconds}``: one timed
  repetition, wall and client CPU (the worker times itself between :func:`start` and
  :func:`stop`, so the pipe is not part of the figure; CPU is this process's, every
  thread of it, so a server's CPU is not in it).
* ``{"op": "burst", "seconds": S, "start": T}`` -> ``{"count": N, "cpu": seconds}``: wait until the
  wall clock reads ``T``, then repeat the step for ``S`` seconds (concurrency).
* ``{"op": "measure"}`` -> ``{"value": ...}``: an untimed figure (bytes on disk).
* ``{"op": "quit"}`` -> the worker closes the contender and exits.

Any failure answers ``{"error": "traceback"}``; the harness reports it and goes on.
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

# The characters random text is made of: letters, digits and a space now and then, so
# a message looks like words but does not compress (no database can flatter itself).
_ALPHABET = string.ascii_letters + string.digits + "      "

USER_CHARS = 300
TOOL_INPUT_CHARS = 120
TOOL_RESULT_CHARS = 480
ANSWER_CHARS = 360
MESSAGES_PER_TURN = 4


_last: list[float] = [0.0, 0.0]  # wall, CPU of the last start()..stop()


def start() -> tuple[float, float]:
    """Start timing one repetition: the wall clock and this process's CPU clock."""
    return time.perf_counter(), time.process_time()


def stop(started: tuple[float, float]) -> float:
    """Stop timing; return the wall seconds (the CPU seconds go with the step's answer)."""
    wall = time.perf_counter() - started[0]
    _last[:] = [wall, time.process_time() - started[1]]
    return wall


def host_workload(workload: str, params: dict[str, Any]) -> tuple[str, str]:
    """The session and the database path of a workload a host's own store runs: append, restore_wide, storage.

    Raises:
        NotApplicable: Any other workload.
    """
    if workload not in ("append", "restore_wide", "storage"):
        raise NotApplicable(f"no {workload} workload")
    return str(params["session"]), str(params["path"])


def timed_read(read: Callable[[], Any]) -> float:
    """One timed read (a restore step): :func:`start`, ``read()``, :func:`stop`.

    What it read must not be empty (a restore that finds nothing is not a restore).
    """
    started = start()
    got = read()
    elapsed = stop(started)
    assert got, "the timed read found nothing"
    return elapsed


def _cpu_of(seconds: float) -> float | None:
    """The CPU time of a step that reported ``seconds``: a per-call figure (a batch's wall
    divided by its size) has its CPU divided alike."""
    wall, cpu = _last
    _last[:] = [0.0, 0.0]
    if wall <= 0:
        return None
    return cpu * (seconds / wall)


class NotApplicable(Exception):
    """The contender cannot do this workload; the message says why."""


def random_text(rng: random.Random, chars: int) -> str:
    """``chars`` characters of incompressible text."""
    return "".join(rng.choices(_ALPHABET, k=chars))


def turn(session: str, n: int) -> list[dict[str, Any]]:
    """Turn ``n`` of a conversation, in Strands' message shape (the neutral form here).

    A turn is four messages: the user's text, the assistant's toolUse, the user's
    toolResult and the assistant's answer. The text is the same for every contender
    (seeded by ``session`` and ``n``) and does not compress.
    """
    rng = random.Random(f"{session}:{n}")
    tool_id = f"tool-{n}-{rng.randrange(1 << 30)}"
    return [
        {"role": "user", "content": [{"text": random_text(rng, USER_CHARS)}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": tool_id,
                        "name": "lookup",
                        "input": {"query": random_text(rng, TOOL_INPUT_CHARS)},
                    }
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": tool_id,
                        "status": "success",
                        "content": [{"text": random_text(rng, TOOL_RESULT_CHARS)}],
                    }
                }
            ],
        },
        {"role": "assistant", "content": [{"text": random_text(rng, ANSWER_CHARS)}]},
    ]


def tool_use(message: dict[str, Any]) -> dict[str, Any] | None:
    """The toolUse block of a neutral message, if it has one."""
    for block in message["content"]:
        if "toolUse" in block:
            return dict(block["toolUse"])
    return None


def tool_result(message: dict[str, Any]) -> dict[str, Any] | None:
    """The toolResult block of a neutral message, if it has one."""
    for block in message["content"]:
        if "toolResult" in block:
            return dict(block["toolResult"])
    return None


def text_of(message: dict[str, Any]) -> str:
    """The text blocks of a neutral message, joined."""
    return "".join(block["text"] for block in message["content"] if "text" in block)


class Contender:
    """What a contender implements; every method may raise :class:`NotApplicable`."""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        """Prepare ``workload``; return facts to report (sizes, settings)."""
        raise NotApplicable(f"does not do {workload}")

    def step(self, n: int) -> float:
        """Run repetition ``n`` and return its duration in seconds."""
        raise NotApplicable("nothing to time")

    def measure(self) -> Any:
        """An untimed figure of the prepared workload (JSON-serializable)."""
        raise NotApplicable("nothing to measure")

    def close(self) -> None:
        """Release connections and files."""


def _answer(out: TextIO, reply: dict[str, Any]) -> None:
    out.write(json.dumps(reply) + "\n")
    out.flush()


def serve(contender: Contender, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
    """Answer the harness's requests until ``quit`` or end of input."""
    for line in stdin:
        request = json.loads(line)
        op = request.get("op")
        try:
            if op == "quit":
                break
            if op == "setup":
                reply: dict[str, Any] = {"ok": True, "info": contender.setup(request["workload"], request["params"])}
            elif op == "step":
                t = contender.step(int(request["n"]))
                reply = {"t": t, "cpu": _cpu_of(t)}
            elif op == "burst":
                delay = float(request["start"]) - time.time()
                if delay > 0:
                    time.sleep(delay)
                cpu = time.process_time()
                deadline = time.perf_counter() + float(request["seconds"])
                count = 0
                while time.perf_counter() < deadline:
                    contender.step(count)
                    count += 1
                reply = {"count": count, "cpu": time.process_time() - cpu}
            elif op == "measure":
                reply = {"value": contender.measure()}
            else:
                reply = {"error": f"unknown op {op!r}"}
        except NotApplicable as exc:
            reply = {"na": str(exc)}
        except Exception:
            reply = {"error": traceback.format_exc(limit=8)}
        _answer(stdout, reply)
    contender.close()
