"""A reverse proxy that serves a port under a path prefix, as jupyter-server-proxy does.

`http://127.0.0.1:P/proxy/PORT/REST` is `http://127.0.0.1:PORT/REST`, websockets included; the
server behind it never sees the prefix. tests/ui/test_web.py opens `vtop --web` through it: a
page whose URLs were absolute (`/static/…`, `ws://host:port/ws`) would miss the prefix and
load nothing. It runs on its own event loop in a thread of the test process.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
from aiohttp import web

PASSED_HEADERS = ("content-type", "location")


async def _pump(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            break


async def _forward(request: web.Request) -> web.StreamResponse:
    target = f"http://127.0.0.1:{request.match_info['port']}/{request.match_info['rest']}"
    if request.query_string:
        target += f"?{request.query_string}"
    async with aiohttp.ClientSession() as session:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            browser_side = web.WebSocketResponse()
            await browser_side.prepare(request)
            async with session.ws_connect(target.replace("http", "ws", 1)) as server_side:
                pumps = [
                    asyncio.create_task(_pump(browser_side, server_side)),
                    asyncio.create_task(_pump(server_side, browser_side)),
                ]
                _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
            await browser_side.close()
            return browser_side
        async with session.get(target, allow_redirects=False) as answer:
            headers = {k: v for k, v in answer.headers.items() if k.lower() in PASSED_HEADERS}
            return web.Response(status=answer.status, body=await answer.read(), headers=headers)


@contextmanager
def prefix_proxy() -> Iterator[int]:
    """The proxy, listening on a free port of 127.0.0.1 (yielded) until the block ends."""
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.add_routes([web.get("/proxy/{port}/{rest:.*}", _forward)])
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield int(port)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
