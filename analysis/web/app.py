"""The web explorer's application: the page and a JSON API that mirrors the command line.

Routes (all answers JSON except the page and its files):

====================  =========================================================================
``GET /``             the page (``static/index.html``)
``GET /static/...``   its script, style sheet and icon
``GET /api/info``     the file's name, start position and counts
``GET /api/probe``    ``?position=P``: as ``dobutsu-tb probe P --json``
``GET /api/line``     ``?position=P[&max_plies=N]``: as ``dobutsu-tb line P --json``
``POST /api/verify-line``  ``{"start": P, "moves": [...] or "m1 m2 ..."}``: one game of
                      ``dobutsu-tb verify-line --json`` (a 400 with ``error`` in front when a
                      move is illegal, as the command exits with 1)
``GET /api/stats``    as ``dobutsu-tb stats --json``
====================  =========================================================================

Positions are in our notation or Fairy-Stockfish's FEN. Errors are ``{"error": "..."}`` with
400 for a malformed or impossible position or move (and wrong types), 404 for a position the
file does not cover (with ``position``, its text) and for unknown routes, 405 for a wrong method,
413 for a request over the limits below; an unexpected failure is a 500 with a one-line message
and never a stack trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse
from starlette.responses import JSONResponse as _StarletteJSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dobutsu_tb.analysis.reports import parse_position
from dobutsu_tb.analysis.web.service import Busy, StatsError, TablebaseService
from dobutsu_tb.tablebase.game.notation import IllegalMoveError
from dobutsu_tb.tablebase.game.position import MAX_TEXT_CHARS, PositionError
from dobutsu_tb.tablebase.probe import MissingPositionError
from dobutsu_tb.tablebase.schema import TablebaseFileError


class JSONResponse(_StarletteJSONResponse):
    """Starlette's JSON answer with non-ASCII characters escaped, so that any text echoed from a
    request (even a lone surrogate, which UTF-8 cannot encode) makes valid JSON, never a 500."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")

STATIC = Path(__file__).with_name("static")
#: Input limits: characters of a position (a FEN with full hands needs about 40), plies of a
#: judged or perfect line (the longest win is 173 plies), characters of a move, bytes of a body.
MAX_POSITION_CHARS = MAX_TEXT_CHARS
MAX_LINE_PLIES = 400
MAX_MOVE_CHARS = 12
MAX_BODY_BYTES = 64 * 1024
#: Tablebase calls waiting or running at once (the worker thread's queue); more are answered
#: 503 at once. Requests still receiving their body hold no place in it.
MAX_QUEUED = 64
#: Requests in the application at once (:class:`Guard`; reading a body included); more get a 503.
MAX_REQUESTS = 512
DEFAULT_LINE_PLIES = 200
#: The page may load only its own files and talk only to its own server.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

log = logging.getLogger("dobutsu_tb.web")


class BadRequest(HTTPException):
    """A request the API refuses, with the message of its ``{"error": ...}`` answer."""

    def __init__(self, message: str, status_code: int = 400):
        super().__init__(status_code=status_code, detail=message)


def create_app(tb_path, in_memory: bool = False) -> "Guard":
    """The web explorer over one tablebase file, fixed for the application's life.

    Parameters
    ----------
    tb_path : str or Path
        The tablebase file; requests never name files.
    in_memory : bool, optional
        Read the whole file into memory first (faster probes; about 11 bytes per position).

    Returns
    -------
    Guard
        An ASGI application (the Starlette application inside :class:`Guard`); its lifespan
        closes the file; ``.state.service`` is the tablebase.

    Raises
    ------
    dobutsu_tb.tablebase.schema.TablebaseFileError
        If the file is missing, corrupt or not a tablebase (checked here, before any request).
    """
    service = TablebaseService(tb_path, in_memory=in_memory, max_queued=MAX_QUEUED)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            await service.aclose()

    app = Starlette(routes=_Api(service).routes(), exception_handlers=ERROR_HANDLERS, lifespan=lifespan)
    app.state.service = service
    app.state.variant = service.metadata.variant
    return Guard(app)


class _Api:
    """The routes' handlers over one tablebase service (the module docstring's table)."""

    def __init__(self, service: TablebaseService):
        self.service = service
        self.variant = service.metadata.variant

    def routes(self) -> list:
        return [
            Route("/", self.page),
            Route("/api/info", self.info),
            Route("/api/probe", self.probe),
            Route("/api/line", self.line),
            Route("/api/verify-line", self.verify_line, methods=["POST"]),
            Route("/api/stats", self.stats),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    async def page(self, request: Request):
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    async def info(self, request: Request):
        return JSONResponse(self.service.info())

    async def probe(self, request: Request):
        return JSONResponse(await self.service.call(self.service.probe, _position_param(request, self.variant)))

    async def line(self, request: Request):
        position = _position_param(request, self.variant)
        max_plies = _int_param(request, "max_plies", DEFAULT_LINE_PLIES, 1, MAX_LINE_PLIES)
        return JSONResponse(await self.service.call(self.service.line, position, max_plies))

    async def verify_line(self, request: Request):
        body = await _json_body(request)
        start = body.get("start", self.service.metadata.start)
        if not isinstance(start, str):
            raise BadRequest('"start" must be a position text like "S/-l-/-c-/-C-/-L-/-"')
        report = await self.service.call(self.service.verify, _position(start, self.variant),
                                         _moves(body.get("moves")))
        if report["illegal"] is None:
            return JSONResponse(report)
        # An illegal move is a bad request, as it is an error (exit code 1) for the command line;
        # the verdicts of the plies before it come along.
        ply, move, reason = report["illegal"]["ply"], report["illegal"]["move"], report["illegal"]["reason"]
        return JSONResponse({"error": f"ply {ply} ({move[:MAX_MOVE_CHARS]}) is illegal: {reason}", **report},
                            status_code=400)

    async def stats(self, request: Request):
        try:
            return JSONResponse(await self.service.stats())
        except StatsError as exc:
            log.error("%s", exc)
            return JSONResponse({"error": str(exc)}, status_code=500)


class Guard:
    """The application's outer layer (ASGI): at most ``max_requests`` requests at once (a 503
    beyond), and every failure answered without a traceback in the log: a client that went away
    is not logged, an unexpected error is one line and a 500, a request cut short because the
    server stops is a 503. (Starlette's error middleware passes every unexpected exception on
    to the server after answering, and uvicorn logs it with its traceback.)

    Parameters
    ----------
    app : starlette.applications.Starlette
    max_requests : int, optional
        Requests served at once (default :data:`MAX_REQUESTS`).

    Attributes
    ----------
    state : the Starlette application's ``state`` (``state.service``: the tablebase service)
    """

    def __init__(self, app: Starlette, max_requests: int = MAX_REQUESTS):
        self.app = app
        self.state = app.state
        self.max_requests = max_requests
        self.active = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.active >= self.max_requests:
            return await _answer(send, 503, {"error": f"busy: {self.max_requests} requests at once; try again"})
        self.active += 1
        started = False

        async def tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except (ClientDisconnect, ConnectionError):
            pass  # the client went away: nobody to answer, nothing to log
        except asyncio.CancelledError:  # the server stops (its grace period is over)
            if not started:
                await _answer(send, 503, {"error": "the server is stopping"})
        except Exception as exc:  # noqa: BLE001 (answered below, logged in one line)
            log.error("unexpected error on %s %s: %s", scope.get("method", "?"), scope.get("path", "?")[:100],
                      " ".join(f"{type(exc).__name__}: {exc}".split())[:300])
            if not started:
                await _answer(send, 500, {"error": "internal error (see the server's log)"})
        finally:
            self.active -= 1


async def _answer(send, status: int, body: dict) -> None:
    """A JSON answer sent straight through ASGI; a client already gone is no error."""
    data = json.dumps(body).encode()
    with contextlib.suppress(Exception):
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


# --- reading requests ------------------------------------------------------------------------


def _position(text: str, variant):
    if len(text) > MAX_POSITION_CHARS:
        raise BadRequest(f"a position is at most {MAX_POSITION_CHARS} characters; got {len(text):,}")
    return parse_position(text, variant)


def _position_param(request: Request, variant):
    text = request.query_params.get("position")
    if text is None or not text.strip():
        raise BadRequest(f"give a position: ?position={variant.start} (our notation) "
                         "or a Fairy-Stockfish FEN such as gle/1c1/1C1/ELG[-] w 0 1")
    return _position(text, variant)


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    if not (text.isascii() and text.isdigit() and low <= int(text) <= high):
        raise BadRequest(f"{name} must be a whole number from {low} to {high}")
    return int(text)


async def _json_body(request: Request) -> dict:
    length = request.headers.get("content-length", "")
    if length.isascii() and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise BadRequest(f"the request body is over {MAX_BODY_BYTES:,} bytes", 413)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise BadRequest(f"the request body is over {MAX_BODY_BYTES:,} bytes", 413)
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise BadRequest('the body must be JSON like {"start": "S/-l-/-c-/-C-/-L-/-", '
                         '"moves": ["Lb4-c3", "Cb2xb3"]}') from None
    if not isinstance(data, dict):
        raise BadRequest('the body must be a JSON object with "start" and "moves"')
    return data


def _moves(moves) -> list[str]:
    if isinstance(moves, str):
        moves = moves.split()
    if not isinstance(moves, list) or not all(isinstance(m, str) for m in moves):
        raise BadRequest('"moves" must be a list of moves like ["Lb4-c3", "Cb2xb3"] or one string "Lb4-c3 Cb2xb3"')
    if not moves:
        raise BadRequest('"moves" is empty: give at least one move')
    if len(moves) > MAX_LINE_PLIES:
        raise BadRequest(f"a line is at most {MAX_LINE_PLIES} plies; got {len(moves):,}", 413)
    long = next((m for m in moves if len(m) > MAX_MOVE_CHARS), None)
    if long is not None:
        raise BadRequest(f"{long[:20]!r}... is not a move (at most {MAX_MOVE_CHARS} characters, like Ca2-a1+)")
    return moves


# --- errors as JSON --------------------------------------------------------------------------


async def _http_error(request: Request, exc: HTTPException):
    message = exc.detail
    if exc.status_code == 404 and message == "Not Found":
        message = f"no such page: {request.url.path[:100]}"
    elif exc.status_code == 405:
        message = f"{request.method[:10]} is not allowed here (allowed: {exc.headers.get('Allow', 'GET')})"
    return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)


async def _busy(request: Request, exc: Exception):
    return JSONResponse({"error": str(exc)}, status_code=503)


async def _bad_input(request: Request, exc: Exception):
    return JSONResponse({"error": str(exc)}, status_code=400)


async def _not_covered(request: Request, exc: MissingPositionError):
    body = {"error": str(exc)}
    with contextlib.suppress(BadRequest, PositionError):
        body["position"] = _position_param(request, request.app.state.variant).text()
    return JSONResponse(body, status_code=404)


async def _damaged_file(request: Request, exc: TablebaseFileError):
    log.error("tablebase file error: %s", exc)
    return JSONResponse({"error": f"the tablebase file cannot be read: {exc}"}, status_code=500)


async def _unexpected(request: Request, exc: Exception):
    # Logged by Guard, to which Starlette passes the exception on after this answer.
    return JSONResponse({"error": "internal error (see the server's log)"}, status_code=500)


#: How each kind of failure is answered (Starlette's exception handlers).
ERROR_HANDLERS = {
    Busy: _busy,
    HTTPException: _http_error,
    PositionError: _bad_input,
    IllegalMoveError: _bad_input,
    MissingPositionError: _not_covered,
    TablebaseFileError: _damaged_file,
    Exception: _unexpected,
}
