"""A headless chromium driven through the Chrome DevTools Protocol, for tests that click: navigate,
run JavaScript in the page, wait for a condition, click, type. `--dump-dom` could only read a page
once; this keeps one browser and one tab open for a test module.

The protocol is JSON over a websocket. The client is websocket-client, already installed as a
dependency of the Kubernetes client (constraints.txt pins it): no new dependency.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websocket

from tests.support.processes import stop_process


class PageError(AssertionError):
    """JavaScript threw in the page, or a wait ran out."""


class Browser:
    """One chromium process, one tab. Stop it with `close` (or use it as a context manager)."""

    def __init__(self, binary: str, timeout: float = 30) -> None:
        self._profile = tempfile.mkdtemp(prefix="sup-cdp-")
        args = [
            binary, "--headless", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-dev-shm-usage", "--remote-debugging-port=0", f"--user-data-dir={self._profile}",
            "about:blank",
        ]  # fmt: skip
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        try:
            port = self._port(timeout)
            page = self._page(port, timeout)
            self._ws = websocket.create_connection(page, timeout=timeout, suppress_origin=True)
        except BaseException:
            self.close()
            raise

    def _port(self, timeout: float) -> int:
        """Chromium writes the port it chose (port 0: any free one) to DevToolsActivePort."""
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            lines = marker.read_text().splitlines() if marker.exists() else []
            if lines and lines[0].strip().isdigit():
                return int(lines[0])
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def _page(self, port: int, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
            for target in targets:
                if target.get("type") == "page":
                    return str(target["webSocketDebuggerUrl"])
            time.sleep(0.05)
        raise RuntimeError("chromium has no page to drive")

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        stop_process(self.process, timeout=10)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the protocol ----------------------------------------------------------------------------

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One command and its result (events that arrive meanwhile are dropped)."""
        command_id = next(self._ids)
        self._ws.send(json.dumps({"id": command_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") != command_id:
                continue
            if "error" in message:
                raise PageError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise PageError(f"{expression}: {text}")
        return result.get("result", {}).get("value")

    # --- what tests do ---------------------------------------------------------------------------

    def navigate(self, url: str, timeout: float = 15) -> None:
        """Load `url` as a new document and wait until it is loaded (a mark left in the old document
        tells them apart). Only a fragment that differs is no new document: go to about:blank first."""
        self.evaluate("window.__cdpOldDocument = true")
        self.send("Page.navigate", url=url)
        self.wait_for("window.__cdpOldDocument === undefined && document.readyState === 'complete'", timeout)

    def wait_for(self, condition: str, timeout: float = 15) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(condition)
            if value:
                return value
            if time.monotonic() > deadline:
                raise PageError(f"timed out waiting for: {condition}")
            time.sleep(0.02)

    def click(self, selector: str) -> None:
        """Click the element `selector` finds; an error if there is none or it is hidden/disabled."""
        found = self.evaluate(
            f"""(() => {{
                const el = document.querySelector({json.dumps(selector)});
                if (!el) return "missing";
                if (el.disabled || el.getClientRects().length === 0) return "hidden or disabled";
                el.click();
                return "ok";
            }})()"""
        )
        if found != "ok":
            raise PageError(f"cannot click {selector}: {found}")

    def fill(self, selector: str, value: str) -> None:
        """Set an input's or select's value as a person would (an input event, then a change event)."""
        self.evaluate(
            f"""(() => {{
                const el = document.querySelector({json.dumps(selector)});
                el.value = {json.dumps(value)};
                el.dispatchEvent(new Event("input", {{bubbles: true}}));
                el.dispatchEvent(new Event("change", {{bubbles: true}}));
            }})()"""
        )

    def text(self, selector: str) -> str:
        value = self.evaluate(
            f"(document.querySelector({json.dumps(selector)}) || {{textContent: ''}}).textContent"
        )
        return " ".join(str(value).split())

    def table(self, selector: str) -> list[list[str]]:
        """The text of each body cell of a table, row by row."""
        rows = self.evaluate(
            f"""Array.from(document.querySelectorAll({json.dumps(selector + " tbody tr")}))
                .map((tr) => Array.from(tr.cells).map((td) => td.textContent.trim().replace(/\\s+/g, " ")))"""
        )
        return [list(row) for row in rows or []]
