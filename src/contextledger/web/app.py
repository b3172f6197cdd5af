"""The ASGI app of ``contextledger serve``: GET-only pages over one open ledger.

Routes (ids travel as query parameters, so any session id works, slashes included):

* ``/`` -- sessions, most recently updated first; ``?q=`` searches ids, ``?page=`` pages;
* ``/session?id=S`` -- every agent of session S side by side;
* ``/session?id=S&agent=A&page=N`` -- one agent, its full history paged;
* ``/entry?session=S&agent=A&id=E`` -- one entry whole;
* ``/static/...`` -- the stylesheet shipped in the package.

The app never writes: it only calls the ledger's queries (open it with
``read_only=True`` to make the database enforce that too).
"""

from __future__ import annotations

import logging
from html import escape

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from contextledger.errors import ContextLedgerError, EntryNotFound, SessionNotFound
from contextledger.ledger import Ledger
from contextledger.web.render import render_entry, render_session, render_sessions

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def _int(request: Request, name: str, default: int = 1) -> int:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        return max(1, int(value))
    except ValueError:
        raise HTTPException(400, f"{name} must be a positive integer, got {value!r}") from None


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise HTTPException(400, f"missing query parameter {name!r}")
    return value


def create_app(ledger: Ledger) -> Starlette:
    """The web app over ``ledger`` (the caller keeps it open while the app serves, and closes it)."""

    def sessions(request: Request) -> Response:
        query = request.query_params.get("q", "")
        return HTMLResponse(render_sessions(ledger, query=query, page=_int(request, "page")))

    def session(request: Request) -> Response:
        html = render_session(
            ledger,
            _required(request, "id"),
            agent=request.query_params.get("agent") or None,
            page=_int(request, "page"),
            all_reductions=request.query_params.get("reductions") == "all",
        )
        return HTMLResponse(html)

    def entry(request: Request) -> Response:
        html = render_entry(
            ledger, _required(request, "session"), _required(request, "agent"), _required(request, "id")
        )
        return HTMLResponse(html)

    def not_found(request: Request, exc: Exception) -> Response:
        return _error_page(404, str(exc))

    def bad_request(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return _error_page(status, exc.detail if isinstance(exc, HTTPException) else str(exc))

    def ledger_error(request: Request, exc: Exception) -> Response:
        logger.warning("path=<%s>, error=<%s> | ledger read failed", request.url.path, exc)
        return _error_page(503, f"the ledger could not be read: {exc}")

    return Starlette(
        routes=[
            Route("/", sessions, methods=["GET"]),
            Route("/session", session, methods=["GET"]),
            Route("/entry", entry, methods=["GET"]),
            Route("/healthz", lambda request: PlainTextResponse("ok"), methods=["GET"]),
            Mount("/static", StaticFiles(packages=[("contextledger.web", "static")]), name="static"),
        ],
        exception_handlers={
            SessionNotFound: not_found,
            EntryNotFound: not_found,
            HTTPException: bad_request,
            ContextLedgerError: ledger_error,
        },
    )


def _error_page(status: int, message: str) -> Response:
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><title>contextledger</title>"
        '<link rel=stylesheet href="/static/style.css"><main><section class="card">'
        f"<h1>{status}</h1><p>{escape(message)}</p><p><a href='/'>All sessions</a></p></section></main></html>"
    )
    return HTMLResponse(body, status_code=status)
