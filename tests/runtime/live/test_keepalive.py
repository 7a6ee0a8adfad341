"""The keep-alive race, reproduced with the CPU twin: it closes idle connections as vLLM does.

A burst of generate calls that reuses connections the server is closing must not fail.
The client's event loop is held busy across the server's close (as in a training run,
where a burst of dispatches follows a quiet spell), so it cannot have seen the close yet
when the burst goes out: every request of the burst meets a closed connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rolloutlog.runtime.live.client import VLLMClient
from rolloutlog.runtime.live.protocol import GenerateRequest, SamplingParams
from rolloutlog.runtime.live.twin.launch import serve_in_thread
from rolloutlog.runtime.live.twin.server import DEFAULT_KEEPALIVE_S, InferenceServer
from tests.runtime.live.vllm_contract import run

SERVER_KEEPALIVE_S = 0.3
BURST = 8


def request(index: int) -> GenerateRequest:
    return GenerateRequest(
        request_id=f"k{index}",
        token_ids=(11, 1, 2, 3, 4, 10),
        sampling=SamplingParams(max_tokens=3, seed=index, ignore_eos=True),
    )


@pytest.fixture
def closing_server(checkpoints: dict[str, Path]) -> Iterator[InferenceServer]:
    started = serve_in_thread(checkpoints["a"], keepalive_s=SERVER_KEEPALIVE_S)
    yield started
    started.stop()


def _closed_by_server(port: int) -> int:
    """Our connections to `port` that the server has closed (TCP state CLOSE_WAIT), as
    Linux lists them in /proc/net/tcp: the close is seen without a timed guess."""
    close_wait = "08"
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            count += remote_port == port and fields[3] == close_wait
    return count


def _wait_until_the_server_closed(url: str, count: int, timeout_s: float = 30.0) -> None:
    port = int(url.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout_s
    while _closed_by_server(port) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server closed fewer than {count} idle connections")
        time.sleep(0.01)


def test_the_twin_keeps_vllms_five_second_keepalive_by_default():
    assert DEFAULT_KEEPALIVE_S == 5.0


def test_a_burst_on_connections_the_server_is_closing_does_not_fail(closing_server):
    """Fails without the transport's resend: each call of the second burst meets a
    connection the server closed while the client was busy (RemoteProtocolError)."""

    async def burst(client: VLLMClient, start: int) -> list[str]:
        done = await asyncio.gather(*(client.generate(request(start + i)) for i in range(BURST)))
        return [generation.finish_reason for generation in done]

    async def scenario() -> list[str]:
        client = VLLMClient(closing_server.url)  # default limits: reuse within 4 s
        try:
            first = await burst(client, 0)  # BURST connections, now idle in the pool
            # the loop is held busy (a blocking wait) while the server closes them all
            _wait_until_the_server_closed(closing_server.url, BURST)
            return first + await burst(client, BURST)
        finally:
            await client.aclose()

    assert run(scenario()) == ["length"] * (2 * BURST)


def test_an_idle_connection_is_closed_by_the_twin_after_its_keepalive(closing_server):
    async def scenario() -> bool:
        host, port = closing_server.url.removeprefix("http://").rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        started = time.monotonic()
        closed = await asyncio.wait_for(reader.read(), timeout=5.0) == b""  # EOF
        writer.close()
        return closed and SERVER_KEEPALIVE_S * 0.5 < time.monotonic() - started < 3.0

    assert run(scenario())
