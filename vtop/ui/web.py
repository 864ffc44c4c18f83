"""The dashboard in a browser (`vtop --web`): textual-serve, behind a token in every path.

textual-serve (Textualize's own) serves a page that runs xterm.js and, for each websocket the
page opens, starts the app as a child process under Textual's web driver (it sets
`TEXTUAL_DRIVER` in the child's environment, which `VtopApp.get_driver_class` obeys) and relays
the screen one way and the keys the other. So the browser shows the very app the terminal
shows, one process a browser session, and there is no second UI to maintain.

Why this lives in vtop/ui: it is how the app reaches a user, as `vtop.ui.driver` is for a
terminal; and it loads aiohttp and jinja2, which only `vtop --web` may pay for (the command
line imports this module when the flag is given, never before: tests/unit/
test_headless_imports.py checks that no other module loads them).

What changes from textual-serve's `Server`, and why:

- Every path starts with the token (`/TOKEN/`, `/TOKEN/ws`, `/TOKEN/static/…`). A middleware
  answers 403 to any request whose first path segment is not the token, compared in constant
  time, before routing: without the token nothing is served, no app process starts, and not
  even which paths exist is learnt. The token is in the path, not the query, because
  textual.js appends `?width=…&height=…` to the websocket URL it is given.
- The page's URLs are relative (`static/`, `ws`). textual-serve writes absolute ones from the
  address it binds, which no browser can reach when that is 0.0.0.0, or when a rental's HTTPS
  proxy (AutoDL's port 6006) or a path-prefixing one (jupyter-server-proxy's
  `/proxy/6006/`) stands between. (A relative websocket URL is standard since 2023.)
- No `/download/…` route: vtop delivers no files through the browser.
- Quiet: no banner and no access log (every logged path would carry the token), and
  `Referrer-Policy: no-referrer` on every answer, so the token never leaves in a Referer.
- The sessions end with the server: each is cancelled on shutdown, which makes textual-serve
  tell its app to quit, and a child still running after `QUIT_GRACE_S` is terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import signal
from collections.abc import Callable
from typing import Any

import aiohttp_jinja2
import jinja2
import psutil
from aiohttp import web
from aiohttp.typedefs import Handler
from textual_serve.server import Server, to_int

TOKEN_BYTES = 24
"""192 random bits, 32 URL-safe characters: not guessable over any network."""

QUIT_GRACE_S = 5.0
"""How long the apps have to quit when the server stops, before they are terminated."""

TEMPLATE = "app_index.html"
"""textual-serve's own page (xterm.js and its styles), rendered with relative URLs."""


def new_token() -> str:
    """A fresh token for one run of the server (it is never stored anywhere)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_matches(path: str, token: str) -> bool:
    """True when the first segment of `path` (`/TOKEN/…`, or `/TOKEN` alone) is `token`.

    The comparison takes the same time however much of the token is right (`hmac`), so a
    stranger cannot find it a character at a time; only its length shows, which is no secret.
    An empty token matches nothing."""
    if not token or not path.startswith("/"):
        return False
    first = path[1:].split("/", 1)[0]
    return hmac.compare_digest(first.encode("utf-8", "surrogateescape"), token.encode("utf-8"))


class TokenServer(Server):
    """textual-serve's server with every route under `/TOKEN/`, refused without it."""

    def __init__(self, command: str, host: str, port: int, token: str) -> None:
        super().__init__(command, host=host, port=port, title="vtop")
        self.token = token
        self._sessions: set[asyncio.Task[Any]] = set()

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        base = f"/{self.token}"
        app.add_routes(
            [
                web.get(base, self._to_page),
                web.get(f"{base}/", self._page),
                web.get(f"{base}/ws", self._session),
                web.static(f"{base}/static", self.statics_path),
            ]
        )
        app.on_response_prepare.append(_no_referrer)
        app.on_shutdown.append(self.on_shutdown)
        return app

    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """403 before routing unless the path starts with the token."""
        if not token_matches(request.path, self.token):
            raise web.HTTPForbidden(text="403: this address needs the URL vtop printed\n")
        return await handler(request)

    async def _to_page(self, request: web.Request) -> web.StreamResponse:
        """`/TOKEN` to `/TOKEN/`, where the page's relative URLs resolve under the token (a
        relative Location too: behind a proxy's path prefix, `/TOKEN/` would leave it)."""
        query = f"?{request.query_string}" if request.query_string else ""
        raise web.HTTPFound(f"{self.token}/{query}")

    async def _page(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, its URLs relative to this one (see the module's docstring)."""
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": "ws",
            "config": {"static": {"url": "static/"}},
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template(TEMPLATE, request, context)
        response.headers["Cache-Control"] = "no-store"
        return response

    async def _session(self, request: web.Request) -> web.StreamResponse:
        """One browser session: textual-serve's websocket, which runs one app process;
        remembered so that a stopping server can end it."""
        task = asyncio.current_task()
        assert task is not None  # aiohttp runs each request in a task
        self._sessions.add(task)
        try:
            return await self.handle_websocket(request)
        finally:
            self._sessions.discard(task)

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: the command line prints the one line that says where to look."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Each session cancelled (textual-serve then tells its app to quit), given
        `QUIT_GRACE_S` to end; whatever app process is left after that is terminated."""
        sessions = set(self._sessions)
        for task in sessions:
            task.cancel()
        if sessions:
            await asyncio.wait(sessions, timeout=QUIT_GRACE_S)
        _end_children()


async def _no_referrer(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Referrer-Policy"] = "no-referrer"


def _end_children() -> None:
    """Terminate the app processes still running (ours alone: this process's children)."""
    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=2.0)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


def serve(command: str, host: str, port: int, token: str, on_ready: Callable[[int], None]) -> None:
    """Serve `command`'s app to browsers on `host:port` until SIGINT, SIGTERM or SIGHUP (but
    not under nohup); `on_ready(port)` once listening (the port bound, when `port` is 0).
    `OSError` when it cannot listen (the port taken, an address this host does not have)."""
    asyncio.run(_serve(TokenServer(command, host, port, token), on_ready))


async def _serve(server: TokenServer, on_ready: Callable[[int], None]) -> None:
    runner = web.AppRunner(await server._make_app(), access_log=None, shutdown_timeout=QUIT_GRACE_S)
    await runner.setup()
    try:
        site = web.TCPSite(runner, server.host, server.port)
        await site.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in _stopping_signals():
            loop.add_signal_handler(sig, stop.set)
        on_ready(_bound_port(runner, server.port))
        await stop.wait()
    finally:
        await runner.cleanup()


def _stopping_signals() -> list[signal.Signals]:
    """SIGINT, SIGTERM, and SIGHUP (the terminal closed) unless it is ignored: `nohup vtop
    --web …` must outlive the terminal (a rental's Jupyter tab) it was started from."""
    wanted = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        wanted.append(signal.SIGHUP)
    return wanted


def _bound_port(runner: web.AppRunner, asked: int) -> int:
    """The port listened on: `asked`, or the one the system chose for 0."""
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return asked
