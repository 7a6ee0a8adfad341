"""`StreamTransport`: httpx's transport replaced by HTTP/1.1 keep-alive over asyncio streams.

Why: a live run keeps ~200 generate calls in flight and makes ~400 a second. httpcore's
connection pool re-scans every connection for every queued request on each state change
(O(connections x requests), encode/httpcore#1035) and asks anyio for socket attributes on
every check; profiled in a training run, the pool alone took ~2 ms of CPU per request,
more than the model's decoding. This transport keeps what the client relies on — httpx's
requests, responses, timeouts and exception types, so `VLLMClient` and the contract tests
are unchanged — and does the rest in a few lines: a list of idle connections per origin,
h11 (httpcore's own HTTP/1.1 parser) for the framing, and one deadline per exchange.

Error mapping, as httpcore does it: a refused or failed connect is `httpx.ConnectError`
(the request was never sent, so the client may retry it), a connect past its timeout is
`httpx.ConnectTimeout`, no complete answer within the read timeout is `httpx.ReadTimeout`,
a reset or closed connection is `httpx.ReadError` / `httpx.RemoteProtocolError`. A
connection is reused only after a complete exchange that left it open; an exchange that
failed or was cancelled closes its connection, which is how the server learns that the
caller went away (and aborts the request).

Keep-alive: a server closes a connection that stayed idle past its keep-alive (vLLM's
HTTP server after 5 s, `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`). A request written to such a
connection while the server closes it is never read: the client sees a reset or a closed
connection before any byte of an answer. Two rules keep that race away from the caller:
an idle connection is reused only within `keepalive_expiry_s` (default 4 s, below the
server's 5 s), and a request that fails on a reused connection before any byte of the
response arrived is sent once more on a fresh connection (the server closed the
connection without reading it, so it never reached the engine). Nothing else is retried
here: a failure on a fresh connection, a timeout, or a failure after the answer began is
the caller's to handle.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Final, NoReturn

import h11
import httpx

_READ_CHUNK: Final = 65536
DEFAULT_KEEPALIVE_EXPIRY_S: Final = 4.0  # vLLM's server closes idle connections after 5 s
_Origin = tuple[bytes, bytes, int]


class _Connection:
    """One keep-alive connection and its h11 state machine."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(our_role=h11.CLIENT)
        self.idle_since = 0.0  # time.monotonic() when it last went back to the pool
        self.reused = False  # this exchange runs on a connection taken from the pool
        self.answered = False  # a byte of this exchange's response has arrived

    @property
    def reusable(self) -> bool:
        """Open, idle, and not closed by the server while it waited in the pool."""
        return (
            self.h11.our_state is h11.IDLE
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        """Send `request` and read its whole response."""
        self.answered = False
        # No Accept-Encoding: bodies are small JSON on loopback or a LAN, and an identity
        # body is what `httpx.Response(content=...)` below expects.
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"accept-encoding"]
        head = h11.Request(method=request.method, target=request.url.raw_path, headers=headers)
        body = request.content
        data = self.h11.send(head) or b""
        if body:
            data += self.h11.send(h11.Data(data=body)) or b""
        data += self.h11.send(h11.EndOfMessage()) or b""
        self.writer.write(data)
        await self.writer.drain()
        response: h11.Response | None = None
        parts: list[bytes] = []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.reader.read(_READ_CHUNK)
                self.answered = self.answered or bool(data)
                self.h11.receive_data(data)
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage) and response is not None:
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response.", request=request
                )
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=b"".join(parts),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    def close(self) -> None:
        self.writer.close()


class StreamTransport(httpx.AsyncBaseTransport):
    """Plain-HTTP keep-alive connections, at most `max_connections` open at once; an idle
    connection is reused only within `keepalive_expiry_s` (see the module docstring)."""

    def __init__(
        self,
        *,
        max_connections: int = 1024,
        keepalive_expiry_s: float = DEFAULT_KEEPALIVE_EXPIRY_S,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        if keepalive_expiry_s < 0:
            raise ValueError(f"keepalive_expiry_s must be >= 0, got {keepalive_expiry_s}")
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._slots = asyncio.Semaphore(max_connections)
        self.keepalive_expiry_s = keepalive_expiry_s

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"StreamTransport speaks plain HTTP, not {request.url.scheme!r}", request=request
            )
        timeouts = request.extensions.get("timeout", {})
        origin = (b"http", request.url.raw_host, request.url.port or 80)
        async with self._slots:
            connection = self._idle_connection(origin)
            if connection is not None:
                try:
                    return await self._exchange(origin, connection, request, timeouts)
                except Exception as error:
                    if not _closed_unread(connection, error):
                        _raise_mapped(error, request)
                    # The server closed this idle connection as the request left: it was
                    # never read, so sending it once more on a fresh connection is safe.
            connection = await _connect(request, timeouts.get("connect"))
            try:
                return await self._exchange(origin, connection, request, timeouts)
            except Exception as error:
                _raise_mapped(error, request)

    async def _exchange(
        self,
        origin: _Origin,
        connection: _Connection,
        request: httpx.Request,
        timeouts: dict[str, float | None],
    ) -> httpx.Response:
        """One exchange; the connection goes back to the pool if it stays open, else closes."""
        try:
            async with asyncio.timeout(timeouts.get("read")):
                response = await connection.exchange(request)
        except BaseException:
            connection.close()
            raise
        if connection.reusable:
            connection.idle_since, connection.reused = time.monotonic(), False
            self._idle.setdefault(origin, []).append(connection)
        else:
            connection.close()
        return response

    def _idle_connection(self, origin: _Origin) -> _Connection | None:
        """The most recently used idle connection that is still open and not expired."""
        idle = self._idle.get(origin)
        oldest = time.monotonic() - self.keepalive_expiry_s
        while idle:
            connection = idle.pop()
            if connection.reusable and connection.idle_since > oldest:
                connection.reused = True
                return connection
            connection.close()
        return None

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()


async def _connect(request: httpx.Request, timeout_s: float | None) -> _Connection:
    host, port = request.url.host, request.url.port or 80
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
    except TimeoutError as error:
        message = f"connect to {host}:{port} timed out"
        raise httpx.ConnectTimeout(message, request=request) from error
    except OSError as error:
        raise httpx.ConnectError(f"{type(error).__name__}: {error}", request=request) from error
    raw = writer.get_extra_info("socket")
    if raw is not None:  # headers and body leave together, never held for an ACK
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _Connection(reader, writer)


def _closed_unread(connection: _Connection, error: Exception) -> bool:
    """True when `error` says the server closed a reused connection without reading the
    request: the connection failed (reset, closed, broken pipe), not the clock, and no
    byte of an answer arrived."""
    if not connection.reused or connection.answered or isinstance(error, TimeoutError):
        return False
    return isinstance(error, OSError | h11.RemoteProtocolError | httpx.TransportError)


def _raise_mapped(error: Exception, request: httpx.Request) -> NoReturn:
    """Raise httpx's exception for a failed exchange; httpx's own errors pass through."""
    mapped = _transport_error(error, request)
    if mapped is error:
        raise error
    raise mapped from error


def _transport_error(error: Exception, request: httpx.Request) -> Exception:
    if isinstance(error, httpx.TransportError):
        return error
    if isinstance(error, TimeoutError):
        return httpx.ReadTimeout("no complete response within the read timeout", request=request)
    if isinstance(error, h11.RemoteProtocolError | h11.LocalProtocolError):
        message = f"the server closed the connection or broke HTTP/1.1 ({error})"
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(error, OSError):
        return httpx.ReadError(f"{type(error).__name__}: {error}", request=request)
    return error
