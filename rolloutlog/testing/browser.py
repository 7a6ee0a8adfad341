"""A headless Chromium driven over the DevTools protocol, for tests and benchmarks of pages.

Chromium is started with `--remote-debugging-port=0` on loopback and a fresh profile; it
writes the port it chose to `DevToolsActivePort` in the profile, and we speak the
protocol (JSON over one websocket, `websocket-client`) to its first page. No WebDriver,
no browser download: Debian's `chromium` package is enough. Everything the page logs as
an error, every uncaught exception and every request it makes is kept in `events`.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import websocket

CHROMIUM_NAMES: Final = ("chromium", "chromium-browser", "google-chrome")
REQUIRE_ENV: Final = "ROLLOUTLOG_REQUIRE_BROWSER"


def find_chromium() -> str | None:
    """The Chromium executable: $ROLLOUTLOG_CHROMIUM, else the first of CHROMIUM_NAMES on PATH."""
    named = os.environ.get("ROLLOUTLOG_CHROMIUM")
    if named:
        return named
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """Chromium did not start, or a DevTools call failed or timed out."""


class HeadlessChromium:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(
        self, executable: str, profile: Path, *, width: int = 1400, height: int = 800
    ) -> None:
        self.executable = executable
        self.profile = profile
        self.width, self.height = width, height
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: websocket.WebSocket | None = None

    def __enter__(self) -> HeadlessChromium:
        self.profile.mkdir(parents=True, exist_ok=True)
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # a previous run's port
        self._process = subprocess.Popen(
            [
                self.executable,
                "--headless",
                "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
                "--disable-gpu",
                "--disable-dev-shm-usage",  # containers often have a small /dev/shm
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={self.width},{self.height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self._socket = websocket.create_connection(
                self._page_socket_url(), timeout=120, suppress_origin=True
            )
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result; events that arrive are kept."""
        if self._socket is None:
            raise BrowserError("the browser is not running")
        request_id = next(self._ids)
        self._socket.send(json.dumps({"id": request_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == request_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def open(self, url: str, *, timeout: float = 120.0) -> float:
        """Load `url` and wait for its load event; returns the seconds it took."""
        began = time.perf_counter()
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout=timeout)
        return time.perf_counter() - began

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (an exception is a BrowserError)."""
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, *, timeout: float = 60.0) -> None:
        """Poll until `expression` is truthy in the page."""
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"Boolean({expression})"):
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout} s waiting for {expression}")
            time.sleep(0.05)

    def console_errors(self) -> list[str]:
        """Errors the page logged or threw since it was opened."""
        errors = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append(json.dumps(params["exceptionDetails"]))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(json.dumps(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                errors.append(params["entry"].get("text", ""))
        return errors

    def requests(self) -> list[str]:
        """The URLs the page requested since it was opened (the page itself included)."""
        return [
            event["params"]["request"]["url"]
            for event in self.events
            if event["method"] == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path) -> None:
        """Save what the page shows as PNG."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def mouse(self, kind: str, x: float, y: float, **params: Any) -> None:
        """One `Input.dispatchMouseEvent` (`mousePressed`, `mouseMoved`, `mouseWheel`...)."""
        self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **params)

    def key(self, key: str) -> None:
        """Press and release one key, as the page sees it in `KeyboardEvent.key`."""
        text = key if len(key) == 1 else ""
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, text=text)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key)

    def _page_socket_url(self) -> str:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            if self._process is not None and self._process.poll() is not None:
                raise BrowserError(f"{self.executable} exited with {self._process.returncode}")
            if time.monotonic() > deadline:
                raise BrowserError(f"{self.executable} did not open its DevTools port in 60 s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as reply:
            targets = json.load(reply)
        pages = [target for target in targets if target.get("type") == "page"]
        if not pages:
            raise BrowserError("Chromium has no page to drive")
        url: str = pages[0]["webSocketDebuggerUrl"]
        return url

    def _stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
