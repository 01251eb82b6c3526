"""The console in a real browser: Playwright driving Debian's chromium (never a downloaded one) at a
laptop's width, watching for what must never happen: a dialog, a script error, a CSP violation."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from playwright.async_api import ConsoleMessage, Dialog, Page, ViewportSize, async_playwright

BROWSERS = ("chromium", "chromium-browser", "/usr/bin/chromium")
LAPTOP: ViewportSize = {"width": 1280, "height": 800}  # a laptop's width: every page must fit it


def chromium() -> str:
    """Debian's chromium (or $CHROMIUM); the tests skip, saying why, only when there is none: a
    browser that is there but fails to start fails them."""
    found = os.environ.get("CHROMIUM") or next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip("no chromium: apt-get install chromium (scripts/test.sh tries) for the console's browser tests")
    return found


@dataclass
class Watched:
    """A page, and what it did that a user would notice as wrong."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # uncaught exceptions, CSP violations

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"a dialog fired: {self.dialogs}"
        assert self.errors == [], f"the page failed: {self.errors}"


@contextlib.asynccontextmanager
async def console_page() -> AsyncIterator[Watched]:
    executable = chromium()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            context = await browser.new_context(viewport=LAPTOP)
            watched = Watched(await context.new_page())

            async def on_dialog(dialog: Dialog) -> None:
                watched.dialogs.append(dialog.message)
                await dialog.dismiss()

            def on_console(message: ConsoleMessage) -> None:
                if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
                    watched.errors.append(message.text)

            watched.page.on("dialog", on_dialog)
            watched.page.on("console", on_console)
            watched.page.on("pageerror", lambda error: watched.errors.append(str(error)))
            yield watched
        finally:
            await browser.close()


async def sign_in(page: Page, base_url: str, key: str) -> None:
    await page.goto(f"{base_url}/console")
    await page.fill("#signin-key", key)
    await page.click("#signin-submit")
    await page.wait_for_selector("#whoami:has-text('Signed in')")


async def text_of(page: Page, selector: str) -> str:
    """The text of the first element `selector` finds, once there is one."""
    found = page.locator(selector).first
    await found.wait_for()
    return await found.text_content() or ""
