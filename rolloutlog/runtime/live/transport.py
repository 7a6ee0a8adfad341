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
"""

from __future__ import annotations

import asyncio
import socket
from typing import Final

import h11
import httpx

_READ_CHUNK: Final = 65536
_Origin = tuple[bytes, bytes, int]


class _Connection:
    """One keep-alive connection and its h11 state machine."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(our_role=h11.CLIENT)

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
                self.h11.receive_data(await self.reader.read(_READ_CHUNK))
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
    """Plain-HTTP keep-alive connections, at most `max_connections` open at once."""

    def __init__(self, *, max_connections: int = 1024) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._slots = asyncio.Semaphore(max_connections)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"StreamTransport speaks plain HTTP, not {request.url.scheme!r}", request=request
            )
        timeouts = request.extensions.get("timeout", {})
        origin = (b"http", request.url.raw_host, request.url.port or 80)
        async with self._slots:
            connection = self._idle_connection(origin)
            if connection is None:
                connection = await _connect(request, timeouts.get("connect"))
            try:
                async with asyncio.timeout(timeouts.get("read")):
                    response = await connection.exchange(request)
            except BaseException as error:
                connection.close()
                mapped = _transport_error(error, request)
                if mapped is error:
                    raise
                raise mapped from error
            if connection.reusable:
                self._idle.setdefault(origin, []).append(connection)
            else:
                connection.close()
        return response

    def _idle_connection(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if connection.reusable:
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


def _transport_error(error: BaseException, request: httpx.Request) -> BaseException:
    """httpx's exception for a failed exchange; cancellation and httpx errors pass through."""
    if isinstance(error, httpx.TransportError | asyncio.CancelledError) or not isinstance(
        error, Exception
    ):
        return error
    if isinstance(error, TimeoutError):
        return httpx.ReadTimeout("no complete response within the read timeout", request=request)
    if isinstance(error, h11.RemoteProtocolError | h11.LocalProtocolError):
        message = f"the server closed the connection or broke HTTP/1.1 ({error})"
        return httpx.RemoteProtocolError(message, request=request)
    if isinstance(error, OSError):
        return httpx.ReadError(f"{type(error).__name__}: {error}", request=request)
    return error
