"""GET /admin: one static page, its script and its style sheet. No data is served here: the page reads
/api/v1 with a bearer token the operator pastes (kept in the tab's sessionStorage, never in a URL
sent to the server), so it can show nothing the token could not read anyway.

A strict Content-Security-Policy allows only these same-origin files: no inline script, no third-party
code, and the script writes every API value as text (textContent), never as HTML.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import Response

router = APIRouter(prefix="/admin", include_in_schema=False)

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}


def _static(name: str) -> Response:
    body = files("sup.admin").joinpath("static", name).read_bytes()
    return Response(body, media_type=_FILES[name], headers=_HEADERS)


@router.get("")
def page() -> Response:
    return _static("index.html")


@router.get("/app.js")
def script() -> Response:
    return _static("app.js")


@router.get("/app.css")
def style() -> Response:
    return _static("app.css")
