"""A real headless browser (Debian's chromium) driven over the DevTools protocol, for page tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, ClientWebSocketResponse

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class Page:
    def __init__(self, socket: ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self._socket.send_json({"id": call_id, "method": method, "params": params})
        while True:  # events arrive between the answers: skip them
            message = await asyncio.wait_for(self._socket.receive_json(), 20)
            if message.get("id") == call_id:
                assert "error" not in message, message
                result: dict[str, Any] = message["result"]
                return result

    async def goto(self, url: str) -> None:
        await self.send("Page.enable")
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 30.0) -> Any:
        """The expression's value once it is truthy (the page renders as its data arrives; `timeout_s`
        bounds a hang, with room for a loaded machine)."""
        for _ in range(int(timeout_s / 0.1)):
            found = await self.evaluate(expression)
            if found:
                return found
            await asyncio.sleep(0.1)
        raise AssertionError(f"the page never satisfied: {expression}")

    async def screenshot(self) -> bytes:
        return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])


@contextlib.asynccontextmanager
async def headless_page(profile: Path, width: int = 1400, height: int = 760) -> AsyncIterator[Page]:
    executable = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    if executable is None:
        pytest.skip("no chromium to test the page in (Debian: apt-get install chromium; scripts/test.sh tries)")
    process = await asyncio.create_subprocess_exec(
        executable,
        "--headless",
        "--no-sandbox",  # tests may run as root in a container
        "--disable-gpu",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    drain: asyncio.Task[None] | None = None
    try:
        endpoint = await _devtools_endpoint(process)
        drain = asyncio.ensure_future(_drain(process))  # a full stderr pipe would stall the browser
        async with ClientSession() as http:
            async with http.get(f"http://{endpoint}/json/list") as response:
                targets = await response.json()
            page = next(t for t in targets if t["type"] == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as socket:
                yield Page(socket)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()
        if drain is not None:
            drain.cancel()


async def _devtools_endpoint(process: asyncio.subprocess.Process) -> str:
    """host:port from chromium's 'DevTools listening on ws://host:port/…' line."""
    assert process.stderr is not None
    seen = []
    for _ in range(200):
        line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode(errors="replace")
        seen.append(line)
        if "DevTools listening on ws://" in line:
            return line.split("ws://", 1)[1].split("/", 1)[0]
        if not line:
            break
    raise AssertionError("chromium did not start its DevTools endpoint:\n" + "".join(seen[-20:]))


async def _drain(process: asyncio.subprocess.Process) -> None:
    assert process.stderr is not None
    while await process.stderr.read(65536):
        pass
