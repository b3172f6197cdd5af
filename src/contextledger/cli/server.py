"""``contextledger serve`` and ``contextledger timeline``: the web view of a ledger.

Both need the ``web`` extra; both only read the ledger. (``contextledger tail``, the
same session followed in a terminal, is in :mod:`contextledger.cli.tail`.)
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from contextledger.cli.errors import ExitCode
from contextledger.cli.options import AgentOption, SessionArg, UrlOption, open_ledger
from contextledger.cli.output import write_file
from contextledger.errors import ConfigurationError

__all__ = ["serve", "timeline"]

logger = logging.getLogger(__name__)


def _need_web() -> None:
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(f"the web view needs its extra: pip install 'contextledger[web]' ({exc})") from exc


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, remembering whether Ctrl-C stopped it."""

        interrupted = False

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if sig == signal.SIGINT:
                self.interrupted = True
            super().handle_exit(sig, frame)

    return Server


def serve(
    url: UrlOption = None,
    host: Annotated[
        str, typer.Option(help="Interface to listen on (loopback by default: the pages are not protected).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free port).")] = 8765,
) -> None:
    """Serve a read-only web view of the ledger: sessions, timelines, every entry."""
    _need_web()
    import uvicorn

    from contextledger.web.app import create_app

    with open_ledger(url) as ledger:
        app = create_app(ledger)
        typer.echo(f"serving {ledger.url} read-only on http://{host}:{port}/ (Ctrl-C to stop)", err=True)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        server = _server_class()(config)
        try:
            server.run()
        except OSError as exc:  # the port is taken, the interface does not exist
            typer.echo(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
            raise typer.Exit(ExitCode.ERROR) from None
        if server.interrupted:
            # uvicorn shuts down gracefully on Ctrl-C and, depending on its release and
            # asyncio's own SIGINT handling, may or may not re-raise it: exit 130 either way.
            typer.echo("\ninterrupted", err=True)
            raise typer.Exit(ExitCode.INTERRUPTED)
        if not server.started:
            raise typer.Exit(ExitCode.ERROR)


def timeline(
    session_id: SessionArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")],
    url: UrlOption = None,
    agent: AgentOption = None,
) -> None:
    """Write a session's page as one self-contained HTML file (to attach to a bug report).

    The file works offline and carries nothing of this machine (not the ledger's URL).
    """
    _need_web()
    from contextledger.web.render import standalone_session

    with open_ledger(url) as ledger:
        html = standalone_session(ledger, session_id, agent=agent)
    write_file(output, html)
    typer.echo(f"wrote the timeline of {session_id} to {output} ({len(html.encode()) // 1024} KiB)", err=True)
