"""The CPU inference server: vLLM 0.33's RL HTTP routes over the torch engine, on loopback.

Why the standard library's `ThreadingHTTPServer`: the server has eleven routes, talks to one
local client, and its hardest semantics (a generate call that hangs while inference is
paused in keep mode, until `/resume`) are simply a thread blocked on an event. One thread
per connection (HTTP/1.1 keep-alive) matches the client's connection pool, adds no
dependency, and keeps the engine — not an event loop — in charge of scheduling. The cost
(a thread per in-flight request) is bounded by the client's pool and the engine's queue.

Like vLLM's HTTP server it closes a keep-alive connection that stayed idle for
`keepalive_s` (default 5 s, vLLM's `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`), so a client that
reuses connections past that meets here the race it meets in production.

It binds 127.0.0.1 unless told otherwise: the routes are vLLM's unauthenticated dev routes.
Run it with `python -m rolloutlog.runtime.live.twin.server --weights DIR [--port P]`; it prints
`listening on <url>` once it accepts connections.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import select
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import torch

from rolloutlog.runtime.live.model import load_checkpoint
from rolloutlog.runtime.live.twin.engine import (
    Engine,
    EngineInputError,
    EngineOverloadedError,
    EnginePausedError,
    PauseMode,
)
from rolloutlog.runtime.live.twin.responses import REQUEST_ID_PREFIX, generate_body
from rolloutlog.runtime.live.twin.validation import (
    ApiError,
    check_generate_body,
    parse_json_body,
    schema_error,
)

DEFAULT_MODEL_NAME: Final = "rolloutlog-digits"
DEFAULT_KEEPALIVE_S: Final = 5.0  # vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE
LOOPBACK_HOSTS: Final = ("127.0.0.1", "::1", "localhost")
_DISCONNECT_POLL_S: Final = 0.2
_CLIENT_GONE: Final = 499  # nginx's "client closed request"; never sent
_PAUSE_MODES: Final[dict[str, PauseMode]] = {"abort": "abort", "wait": "wait", "keep": "keep"}
_log = logging.getLogger(__name__)


class _Text(str):
    """A plain-text body (Prometheus metrics); every other body is JSON."""


class _Reply(Exception):
    """A finished answer, raised from anywhere in a route: status and JSON (None: empty)."""

    def __init__(self, status: int, body: Any = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client's pool reuses connections
    disable_nagle_algorithm = True  # headers and body leave at once, not 40 ms apart
    server: _HttpServer

    def setup(self) -> None:
        # A socket timeout ends the wait for the next request line: an idle keep-alive
        # connection is closed after `keepalive_s`, as uvicorn does under vLLM. While a
        # request runs the handler never blocks reading the socket, so it is not affected.
        super().setup()
        self.connection.settimeout(self.server.keepalive_s)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        route = self.server.app.routes.get(parts.path)
        try:
            if route is None:
                raise ApiError(404, "NotFoundError", "Not Found")
            if route[0] != method:
                raise ApiError(405, "MethodNotAllowed", "Method Not Allowed")
            route[1](self, parse_qs(parts.query))
        except _Reply as reply:
            self._send(reply.status, reply.body)
        except ApiError as error:
            self._send(error.status, error.body())
        except Exception as error:  # the route failed: vLLM's generic 500 handler
            _log.exception("route %s failed", parts.path)
            self._send(500, ApiError(500, "InternalServerError", str(error)).body())

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def json_body(self, *, require_json_type: bool = False) -> Any:
        raw = self.read_body()
        content_type = self.headers.get("Content-Type") if require_json_type else None
        return parse_json_body(raw, content_type or "application/json")

    def client_gone(self) -> bool:
        """True once the client closed its connection (vLLM aborts such requests)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
            return peeked == b""
        except OSError:
            return True

    def _send(self, status: int, body: Any) -> None:
        if status == _CLIENT_GONE:  # nobody is listening: close instead of answering
            self.close_connection = True
            return
        text = isinstance(body, _Text)
        payload = b"" if body is None else (body if text else json.dumps(body)).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a burst of new connections must not overflow the backlog
    app: InferenceApp
    keepalive_s: float = DEFAULT_KEEPALIVE_S

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer is routine (timeouts, aborts); log, not print."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            _log.debug("client %s went away: %s", client_address, error)
        else:
            _log.exception("error while serving %s", client_address)


class InferenceApp:
    """The route functions, bound to one engine."""

    def __init__(self, engine: Engine, model_name: str = DEFAULT_MODEL_NAME) -> None:
        self.engine = engine
        self.model_name = model_name
        self.routes = {
            "/inference/v1/generate": ("POST", self.generate),
            "/inference/v1/abort_requests": ("POST", self.abort_scale_out),
            "/abort_requests": ("POST", self.abort_rl),
            "/pause": ("POST", self.pause),
            "/resume": ("POST", self.resume),
            "/is_paused": ("GET", self.is_paused),
            "/collective_rpc": ("POST", self.collective_rpc),
            "/update_weight_version": ("POST", self.update_weight_version),
            "/weight_info": ("GET", self.weight_info),
            "/health": ("GET", self.health),
            "/metrics": ("GET", self.metrics),
        }

    def generate(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        parsed = check_generate_body(handler.json_body(require_json_type=True))
        if parsed.model is not None and parsed.model != self.model_name:
            raise ApiError(
                404,
                "NotFoundError",
                f"The model `{parsed.model}` does not exist. Valid aliases: {self.model_name}.",
                "model",
            )
        caller_id = handler.headers.get("X-Request-Id") or parsed.request_id
        external_id = REQUEST_ID_PREFIX + (caller_id or secrets.token_hex(8))
        try:
            request = self.engine.submit(external_id, parsed.token_ids, parsed.spec)
        except EngineInputError as error:
            raise ApiError(400, "BadRequestError", str(error), error.param) from error
        except (EnginePausedError, EngineOverloadedError) as error:
            raise ApiError(503, "ServiceUnavailableError", str(error)) from error
        while not request.done.wait(_DISCONNECT_POLL_S):
            if handler.client_gone():
                self.engine.abort([external_id])
                raise _Reply(_CLIENT_GONE)
        if request.finish_reason == "error":
            raise ApiError(500, "InternalServerError", f"generation failed: {request.error}")
        raise _Reply(200, generate_body(request, self.model_name, parsed.return_token_ids))

    def abort_scale_out(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        body = _json_or_400(handler)
        ids = body.get("request_ids") if isinstance(body, dict) else None
        if ids is None:
            raise ApiError(400, "Bad Request", "Missing 'request_ids' in request body")
        self.engine.abort([ids] if isinstance(ids, str) else [str(i) for i in ids])
        raise _Reply(200)

    def abort_rl(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        body = _json_or_400(handler, empty_ok=True)
        if not isinstance(body, dict):
            raise ApiError(400, "Bad Request", "Request body must be a JSON object")
        ids = body.get("request_ids")
        if not ids:
            raise _Reply(200, {"status": "aborted", "aborted": self.engine.abort(None)})
        ids = [ids] if isinstance(ids, str) else [str(i) for i in ids]
        self.engine.abort(ids)
        raise _Reply(200, {"status": "aborted", "aborted": len(ids)})

    def pause(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        raw_mode = _query_value(query, "mode", "abort")
        mode = _PAUSE_MODES.get(raw_mode)
        if mode is None:
            raise schema_error(
                "literal_error", "query.mode", "Input should be 'abort', 'wait' or 'keep'", raw_mode
            )
        _query_bool(query, "clear_cache", True)  # validated; this engine keeps no cache
        try:
            self.engine.pause(mode)
        except Exception as error:
            raise _Reply(500, {"error": f"Failed to pause generation: {error}"}) from error
        raise _Reply(200, {"status": "paused"})

    def resume(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        self.engine.resume()
        raise _Reply(200, {"status": "resumed"})

    def is_paused(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        raise _Reply(200, {"is_paused": self.engine.is_paused})

    def collective_rpc(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        body = _json_or_400(handler)
        if not isinstance(body, dict):
            raise ApiError(400, "Bad Request", "Request body must be a JSON object")
        method = body.get("method")
        if method is None:
            raise ApiError(400, "Bad Request", "Missing 'method' in request body")
        try:
            if method != "reload_weights":
                raise AttributeError(f"worker has no method {method!r}")
            path = (body.get("kwargs") or {}).get("weights_path")
            self.engine.reload_weights(Path(path) if path else None)
        except Exception as error:
            message = f"Call to collective_rpc method failed: {type(error).__name__}: {error}"
            raise ApiError(500, "InternalServerError", message) from error
        raise _Reply(200, {"results": [None]})

    def update_weight_version(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        body = handler.json_body()
        value = body.get("new_version") if isinstance(body, dict) else None
        if value is None:
            raise schema_error("missing", "body.new_version", "Field required", None)
        if not isinstance(value, str):
            raise schema_error(
                "string_type", "body.new_version", "Input should be a valid string", value
            )
        self.engine.set_weight_version(value)
        raise _Reply(200, {"success": True, "new_version": value})

    def weight_info(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        raise _Reply(200, {"weight_version": self.engine.weight_version})

    def health(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        raise _Reply(200 if self.engine.alive else 503)

    def metrics(self, handler: _Handler, query: dict[str, list[str]]) -> None:
        """vLLM's two queue gauges in Prometheus text: a test (or a dashboard) sees that a
        request reached the engine without watching the clock."""
        unfinished, label = self.engine.unfinished, f'{{model_name="{self.model_name}"}}'
        running = min(unfinished, self.engine.max_batch)
        gauges = {"num_requests_running": running, "num_requests_waiting": unfinished - running}
        lines = [
            f"# TYPE vllm:{name} gauge\nvllm:{name}{label} {float(value)}"
            for name, value in gauges.items()
        ]
        raise _Reply(200, _Text("\n".join(lines) + "\n"))


def _json_or_400(handler: _Handler, *, empty_ok: bool = False) -> Any:
    raw = handler.read_body()
    if not raw.strip() and empty_ok:
        return {}
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(400, "Bad Request", f"JSON decode error: {error}") from error


def _query_value(query: dict[str, list[str]], name: str, default: str) -> str:
    values = query.get(name)
    return values[-1] if values else default


def _query_bool(query: dict[str, list[str]], name: str, default: bool) -> bool:
    """pydantic's lax bool parsing of a query value."""
    raw = _query_value(query, name, str(default)).lower()
    if raw in ("1", "true", "t", "yes", "y", "on"):
        return True
    if raw in ("0", "false", "f", "no", "n", "off"):
        return False
    raise schema_error(
        "bool_parsing",
        f"query.{name}",
        "Input should be a valid boolean, unable to interpret input",
        raw,
    )


class InferenceServer:
    """An engine and its HTTP server, run on background threads; `url` once started."""

    def __init__(
        self,
        engine: Engine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = DEFAULT_MODEL_NAME,
        keepalive_s: float = DEFAULT_KEEPALIVE_S,
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            _log.warning("serving on %s: these routes are unauthenticated", host)
        if keepalive_s <= 0:
            raise ValueError(f"keepalive_s must be > 0, got {keepalive_s}")
        self.engine = engine
        self._http = _HttpServer((host, port), _Handler)
        self._http.app = InferenceApp(engine, model_name)
        self._http.keepalive_s = keepalive_s
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.05,), name="http", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}"

    def start(self) -> InferenceServer:
        self.engine.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, abort what is in flight, and join the threads."""
        self.engine.stop()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, required=True, help="checkpoint directory")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument("--max-batch", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0, help="seeds requests sent without one")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--min-step-s",
        type=float,
        default=0.0,
        help="each decode step takes at least this long (imitates a larger model)",
    )
    parser.add_argument(
        "--timeout-keep-alive",
        type=float,
        default=DEFAULT_KEEPALIVE_S,
        help="close a keep-alive connection idle this long, in seconds (vLLM: 5)",
    )
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="exit when stdin closes (a parent that dies never leaves this server behind)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    engine = Engine(
        load_checkpoint(args.weights),
        weights_dir=args.weights,
        max_batch=args.max_batch,
        seed=args.seed,
        min_step_s=args.min_step_s,
    )
    server = InferenceServer(
        engine,
        host=args.host,
        port=args.port,
        model_name=args.model_name,
        keepalive_s=args.timeout_keep_alive,
    )
    server.start()
    print(f"listening on {server.url}", flush=True)
    try:
        if args.exit_with_parent:
            sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
        else:
            threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
