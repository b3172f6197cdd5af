"""The ASGI app of ``contextledger serve``: GET-only pages over one open ledger.

Routes (ids travel as query parameters, so any session id works, slashes included):

* ``/`` -- sessions, most recently updated first; ``?q=`` searches ids, ``?page=`` pages;
* ``/session?id=S`` -- every agent of session S on one chart, reductions paged
  (``rpage``) and filtered (``trigger``, ``strategy``, ``agent_filter``, ``from`` and
  ``to`` in epoch seconds), ``q`` searches the session's messages and summaries
  (``spage``); ``&agent=A`` focuses on one agent and adds its full history (``hpage``);
  ``&part=reductions`` renders the reductions alone (what the page's script swaps in);
* ``/entry?session=S&agent=A&id=E`` -- one entry whole;
* ``/reduction?session=S&agent=A&id=R`` -- one reduction whole;
* ``/static/...`` -- the stylesheets and scripts shipped in the package.

A session page carries an ``ETag`` derived from every agent's version: the page's
script asks again every few seconds with ``If-None-Match`` and gets ``304 Not
Modified`` (no body, no rendering) until an agent commits or a fork is taken of
one -- that is how a page
follows a running agent at no cost while it idles.

Every response carries a strict Content-Security-Policy and ``nosniff`` (see
:mod:`contextledger.web.security`). The app never writes: it only calls the ledger's
queries (open it with ``read_only=True`` to make the database enforce that too).
"""

from __future__ import annotations

import logging
import math

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contextledger.errors import ContextLedgerError, EntryNotFound, SessionNotFound
from contextledger.ledger import Ledger
from contextledger.web.data import load_session, session_links, session_page, session_tag
from contextledger.web.query import Filters, SessionQuery
from contextledger.web.render import (
    PARTS,
    Links,
    render_entry,
    render_error,
    render_part,
    render_reduction,
    render_session,
    render_sessions,
)
from contextledger.web.security import SERVED_HEADERS

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


class SecurityHeaders:
    """ASGI middleware adding :data:`SERVED_HEADERS` to every HTTP response (static files included)."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to the response's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SERVED_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, sending)


def _int(request: Request, name: str, default: int = 1) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        return max(1, int(value))
    except ValueError:
        raise HTTPException(400, f"{name} must be a positive integer, got {value!r}") from None


def _time(request: Request, name: str) -> float | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise HTTPException(400, f"{name} must be a time in seconds since the epoch, got {value!r}")
    return number


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise HTTPException(400, f"missing query parameter {name!r}")
    return value


def session_query(request: Request) -> SessionQuery:
    """The :class:`SessionQuery` a request's parameters ask for.

    Raises:
        HTTPException: A page number or a time is not a number (400).
    """
    params = request.query_params
    filters = Filters(
        triggers=tuple(params.getlist("trigger")),
        strategies=tuple(params.getlist("strategy")),
        agents=tuple(params.getlist("agent_filter")),
        since=_time(request, "from"),
        until=_time(request, "to"),
    )
    return SessionQuery(
        agent=params.get("agent") or None,
        filters=filters,
        rpage=_int(request, "rpage"),
        hpage=_int(request, "hpage"),
        q=params.get("q", "").strip(),
        spage=_int(request, "spage"),
        unit="messages" if params.get("unit") == "messages" else "tokens",
    )


def links(request: Request) -> Links:
    """Links of the app where it is mounted (its ``root_path``: ``Mount("/ledger", app=...)`` works)."""
    return Links(root=str(request.scope.get("root_path", "")).rstrip("/"))


def create_app(ledger: Ledger) -> Starlette:
    """The web app over ``ledger`` (the caller keeps it open while the app serves, and closes it).

    Mount it under a prefix of another ASGI app if you like: its links follow.
    """

    def sessions(request: Request) -> Response:
        query = request.query_params.get("q", "")
        app, user = (request.query_params.get(name) or None for name in ("app", "user"))
        page = render_sessions(
            ledger, query=query, page=_int(request, "page"), links=links(request), app=app, user=user
        )
        return HTMLResponse(page)

    def session(request: Request) -> Response:
        session_id = _required(request, "id")
        query = session_query(request)
        part = request.query_params.get("part") or None
        if part is not None and part not in PARTS:
            raise HTTPException(400, f"part must be one of {', '.join(PARTS)}, got {part!r}")
        snapshots = load_session(ledger, session_id)
        # The tag names the ledger's state: what a page shows is decided by it and the URL,
        # so the script may ask with the tag of the page it shows after changing its filters.
        etag = f'W/"{session_tag(session_id, snapshots, session_links(ledger, session_id))}"'
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if etag in (t.strip() for t in request.headers.get("if-none-match", "").split(",")):
            return Response(status_code=304, headers=headers)
        page = session_page(ledger, session_id, query, snapshots=snapshots)
        if part is not None:
            html = render_part(page, part, links(request))
        else:
            html = render_session(ledger, session_id, page=page, etag=etag, links=links(request))
        return HTMLResponse(html, headers=headers)

    def entry(request: Request) -> Response:
        html = render_entry(
            ledger,
            _required(request, "session"),
            _required(request, "agent"),
            _required(request, "id"),
            links=links(request),
        )
        return HTMLResponse(html)

    def reduction(request: Request) -> Response:
        html = render_reduction(
            ledger,
            _required(request, "session"),
            _required(request, "agent"),
            _required(request, "id"),
            links=links(request),
        )
        return HTMLResponse(html)

    def not_found(request: Request, exc: Exception) -> Response:
        return HTMLResponse(render_error(404, str(exc), links=links(request)), status_code=404)

    def bad_request(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else str(exc)
        return HTMLResponse(render_error(status, str(detail), links=links(request)), status_code=status)

    def ledger_error(request: Request, exc: Exception) -> Response:
        logger.warning("path=<%s>, error=<%s> | ledger read failed", request.url.path, exc)
        message = f"the ledger could not be read: {exc}"
        return HTMLResponse(render_error(503, message, links=links(request)), status_code=503)

    app = Starlette(
        routes=[
            Route("/", sessions, methods=["GET"]),
            Route("/session", session, methods=["GET"]),
            Route("/entry", entry, methods=["GET"]),
            Route("/reduction", reduction, methods=["GET"]),
            Route("/healthz", lambda request: PlainTextResponse("ok"), methods=["GET"]),
            # Pages name no icon; a browser asking anyway (for a bare part) gets an empty answer.
            Route("/favicon.ico", lambda request: Response(status_code=204), methods=["GET"]),
            Mount("/static", StaticFiles(packages=[("contextledger.web", "static")]), name="static"),
        ],
        exception_handlers={
            SessionNotFound: not_found,
            EntryNotFound: not_found,
            HTTPException: bad_request,
            ContextLedgerError: ledger_error,
        },
    )
    app.add_middleware(SecurityHeaders)
    return app
