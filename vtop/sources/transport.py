"""An httpx transport for polling one server: one kept-alive HTTP/1.1 connection, asyncio
streams for the I/O and h11 for the protocol.

httpx's own transport (httpcore over anyio) is general: a connection pool, HTTP/2, proxies,
trace hooks, and several layers of streams under each request. A poller needs none of that:
it asks one origin one request at a time, every second, all day. With this transport the live
TUI spends about a tenth less CPU in all (two TUIs side by side on one simulator, one with
each transport). It keeps httpx for what users meet (redirects, auth, gzip, timeouts, errors)
and h11, httpx's own HTTP/1.1 parser, for the framing (chunked bodies, keep-alive, malformed
answers), and replaces only the connection handling.

Behaviour that httpx's transport has and this one keeps: a connection the server closed while
idle is noticed before it is reused (and a reused one that fails before any answer is retried
once on a fresh connection); the connect, read and write timeouts of each request; TLS with
the client's verification setting (or the SSLContext it is given); failures raised as httpx's
exceptions (ConnectError, ReadTimeout, RemoteProtocolError, ...), so callers handle both
transports alike. It never speaks to a proxy: vllm.py gives a proxied endpoint httpx's own.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import h11
import httpx

_READ_BYTES = 64 * 1024


class _Connection:
    """One TCP (or TLS) connection and its h11 state."""

    def __init__(
        self,
        origin: tuple[str, str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)

    @property
    def reusable(self) -> bool:
        """Idle, and the server has not closed it (an idle connection has nothing to read)."""
        return (
            self.h11.our_state is h11.IDLE
            and not self.writer.is_closing()
            and not self.reader.at_eof()
        )

    async def send(self, event: h11.Event, timeout: float | None) -> None:
        data = self.h11.send(event)
        if data:
            self.writer.write(data)
            try:
                async with asyncio.timeout(timeout):
                    await self.writer.drain()
            except TimeoutError:
                raise httpx.WriteTimeout("timed out sending the request") from None
            except OSError as exc:
                raise httpx.WriteError(str(exc) or type(exc).__name__) from exc

    async def next_event(self, timeout: float | None) -> h11.Event:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is h11.PAUSED:  # bytes past the end of the answer: not HTTP/1.1 as asked
                raise httpx.RemoteProtocolError("the server sent more than one answer")
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                async with asyncio.timeout(timeout):
                    data = await self.reader.read(_READ_BYTES)
            except TimeoutError:
                raise httpx.ReadTimeout("timed out waiting for the server") from None
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
            if not data and self.h11.their_state is h11.SEND_RESPONSE:
                # EOF before an answer (or after bytes that are not one): httpx's transport
                # says so in these words; a reused connection is retried on this error.
                raise _Unanswered
            self.h11.receive_data(data)

    def close(self) -> None:
        self.writer.close()


class _Unanswered(httpx.RemoteProtocolError):
    def __init__(self) -> None:
        super().__init__("Server disconnected without sending a response.")


class _Body(httpx.AsyncByteStream):
    """The response body; the connection goes back for reuse once it is read to the end."""

    def __init__(
        self, transport: OneOriginTransport, conn: _Connection, timeout: float | None
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._timeout = timeout
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            event = await conn.next_event(self._timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._done = True
                return
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("server closed the connection mid-answer")

    async def aclose(self) -> None:
        self._transport._release(self._conn, finished=self._done)


class OneOriginTransport(httpx.AsyncBaseTransport):
    """httpx transport over one kept-alive HTTP/1.1 connection (a new one for a new origin)."""

    def __init__(self, *, verify: bool | ssl.SSLContext = True) -> None:
        """`verify`: an SSLContext to use as is (vtop's trust settings), or whether to check
        certificates against the default store."""
        if isinstance(verify, ssl.SSLContext):
            self._tls = verify
        else:
            self._tls = ssl.create_default_context()
            if not verify:
                self._tls.check_hostname = False
                self._tls.verify_mode = ssl.CERT_NONE
        self._idle: _Connection | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
        conn = self._take(origin)
        fresh = conn is None
        while True:
            if conn is None:
                conn = await self._connect(origin, timeouts.get("connect"))
            try:
                return await self._exchange(conn, request, body, timeouts)
            except _Unanswered:
                conn.close()
                if fresh:
                    raise
                conn, fresh = None, True  # the server dropped an idle connection: once more
            except BaseException:
                conn.close()
                raise

    async def aclose(self) -> None:
        if self._idle is not None:
            self._idle.close()
            self._idle = None

    # -- connections ---------------------------------------------------------------------------

    def _take(self, origin: tuple[str, str, int]) -> _Connection | None:
        conn, self._idle = self._idle, None
        if conn is not None and conn.origin == origin and conn.reusable:
            return conn
        if conn is not None:
            conn.close()
        return None

    def _release(self, conn: _Connection, *, finished: bool) -> None:
        h = conn.h11
        if finished and h.our_state is h11.DONE and h.their_state is h11.DONE:
            h.start_next_cycle()
            if self._idle is not None:
                self._idle.close()
            self._idle = conn
        else:
            conn.close()

    async def _connect(self, origin: tuple[str, str, int], timeout: float | None) -> _Connection:
        scheme, host, port = origin
        tls = self._tls if scheme == "https" else None
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None, limit=1 << 20
                )
        except TimeoutError:
            raise httpx.ConnectTimeout("timed out connecting") from None
        except OSError as exc:  # refused, unknown host, TLS failures (SSLError is an OSError)
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        except UnicodeError:  # a name the resolver cannot encode (`a..b`, a label over 63)
            raise httpx.ConnectError("bad host name") from None
        return _Connection(origin, reader, writer)

    # -- one exchange ---------------------------------------------------------------------------

    async def _exchange(
        self,
        conn: _Connection,
        request: httpx.Request,
        body: bytes,
        timeouts: dict[str, float | None],
    ) -> httpx.Response:
        headers = list(request.headers.raw)
        if body and not any(k.lower() == b"content-length" for k, _ in headers):
            headers.append((b"Content-Length", str(len(body)).encode()))
        target = request.url.raw_path
        await conn.send(
            h11.Request(method=request.method, target=target, headers=headers),
            timeouts.get("write"),
        )
        if body:
            await conn.send(h11.Data(data=body), timeouts.get("write"))
        await conn.send(h11.EndOfMessage(), timeouts.get("write"))
        read = timeouts.get("read")
        while True:
            event = await conn.next_event(read)
            if isinstance(event, h11.Response):
                break
            if isinstance(event, h11.ConnectionClosed):
                raise _Unanswered
            # h11.InformationalResponse (100 Continue and the like): wait for the real one
        return httpx.Response(
            event.status_code,
            headers=list(event.headers),
            stream=_Body(self, conn, read),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": event.reason},
        )
