"""`StreamTransport`'s keep-alive rules, against a scripted HTTP server on loopback.

The script says, per connection, how each request on it is answered: `ok` (a complete
answer, the connection kept open), `drop` (closed without reading the request, as a
server closing an idle connection does), `partial` (the first bytes of an answer, then
closed) or `hang` (never answered). The server counts connections and requests read, so
the tests can tell a request that was resent from one that was not. The transport's clock
is the test's (`clock`): a connection's idle time is what the test says, not how fast the
machine ran, and the clients' timeouts only guard against a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace

import httpx
import pytest

from rolloutlog.runtime.live import transport as transport_module
from rolloutlog.runtime.live.client import ClientLimits, VLLMClient
from rolloutlog.runtime.live.protocol import GenerateRequest, InferenceUnavailable
from rolloutlog.runtime.live.transport import DEFAULT_KEEPALIVE_EXPIRY_S, StreamTransport
from tests.runtime.live.vllm_contract import run

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class ScriptedServer:
    """Connection `i` answers its requests as `scripts[i]` says (then `ok` for the rest)."""

    def __init__(self, scripts: Sequence[Sequence[str]]) -> None:
        self.scripts = [list(script) for script in scripts]
        self.connections = 0
        self.requests_read = 0
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        script = self.scripts[self.connections] if self.connections < len(self.scripts) else []
        self.connections += 1
        try:
            for action in [*script, *["ok"] * 100]:
                if action == "drop":  # closed without reading what the client sent
                    await reader.read(1)  # wait until a request is on its way
                    return
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (int(line.split(b":")[1]) for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-length:")),
                    0,
                )  # fmt: skip
                await reader.readexactly(length)
                self.requests_read += 1
                if action == "partial":
                    writer.write(OK[:17])
                    await writer.drain()
                    return
                if action == "hang":
                    await asyncio.sleep(3600)
                writer.write(OK)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def scripted(*scripts: Sequence[str]) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(scripts)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/x"
    try:
        yield server
    finally:
        listener.close()


class Clock:
    """The transport's `time.monotonic`, moved only by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(transport_module, "time", SimpleNamespace(monotonic=lambda: fake.now))
    return fake


def client(keepalive_expiry_s: float = DEFAULT_KEEPALIVE_EXPIRY_S) -> httpx.AsyncClient:
    transport = StreamTransport(keepalive_expiry_s=keepalive_expiry_s)
    return httpx.AsyncClient(transport=transport, timeout=30.0)  # only a hang's guard


def test_the_default_expiry_is_below_vllms_five_second_keepalive():
    assert DEFAULT_KEEPALIVE_EXPIRY_S < 5.0
    assert ClientLimits().keepalive_expiry_s == DEFAULT_KEEPALIVE_EXPIRY_S
    with pytest.raises(ValueError, match="keepalive_expiry_s"):
        StreamTransport(keepalive_expiry_s=-1)
    with pytest.raises(ValueError, match="keepalive_expiry_s"):
        ClientLimits(keepalive_expiry_s=-1)


def test_an_idle_connection_is_reused_within_its_expiry(clock):
    async def scenario():
        async with scripted() as server, client(keepalive_expiry_s=1.0) as http:
            for _ in range(3):
                assert (await http.post(server.url, json={})).status_code == 200
                clock.advance(0.9)
            return server.connections

    assert run(scenario()) == 1


def test_an_idle_connection_past_its_expiry_is_never_reused(clock):
    async def scenario():
        async with scripted() as server, client(keepalive_expiry_s=1.0) as http:
            await http.get(server.url)
            clock.advance(1.0)
            await http.get(server.url)
            return server.connections

    assert run(scenario()) == 2


def test_a_request_the_server_dropped_unread_on_a_reused_connection_is_sent_once_more():
    async def scenario():
        async with scripted(["ok", "drop"]) as server, client() as http:
            await http.post(server.url, json={"n": 1})
            response = await http.post(server.url, json={"n": 2})
            return response.status_code, server.connections, server.requests_read

    assert run(scenario()) == (200, 2, 2)


def test_a_failure_on_a_fresh_connection_is_not_retried():
    async def scenario():
        async with scripted(["drop"]) as server, client() as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.post(server.url, json={})
            return server.connections

    assert run(scenario()) == 1


def test_a_failure_after_the_answer_began_is_not_retried():
    async def scenario():
        async with scripted(["ok", "partial"]) as server, client() as http:
            await http.get(server.url)
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get(server.url)
            return server.connections, server.requests_read

    assert run(scenario()) == (1, 2)


def test_a_timeout_on_a_reused_connection_is_not_retried():
    async def scenario():
        async with scripted(["ok", "hang"]) as server, client() as http:
            await http.get(server.url)
            with pytest.raises(httpx.ReadTimeout):
                await http.get(server.url, timeout=0.2)
            return server.connections, server.requests_read

    assert run(scenario()) == (1, 2)


def test_only_one_resend_when_the_fresh_connection_fails_too():
    async def scenario():
        async with scripted(["ok", "drop"], ["drop"]) as server, client() as http:
            await http.get(server.url)
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get(server.url)
            return server.connections

    assert run(scenario()) == 2


def test_a_generate_whose_connection_was_never_established_is_retried(recorder):
    """A connect that times out (here: a listener whose accept queue is full) never sent
    the request, so `generate` may retry it, a bounded number of times."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepts: one connection fills the queue
        port = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:  # fill the queue; these connects may never complete
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))

        async def scenario() -> None:
            http = recorder.client(transport=StreamTransport(), trust_env=False)
            limits = ClientLimits(connect_timeout_s=0.2, attempts=3, backoff_s=0.01)
            client = VLLMClient(f"http://127.0.0.1:{port}", limits=limits, http=http)
            request = GenerateRequest(request_id="c", token_ids=(11, 1, 10))
            try:
                with pytest.raises(InferenceUnavailable, match=r"after 3 attempt.*ConnectTimeout"):
                    await client.generate(request)
            finally:
                await client.aclose()

        try:
            run(scenario())
        finally:
            for filler in fillers:
                filler.close()
    assert [path for _, path, _ in recorder.sent] == ["/inference/v1/generate"] * 3
