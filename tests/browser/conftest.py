"""Browser tests drive Debian's headless Chromium (never a downloaded browser) with Playwright
against a live studio (tests/browser/live_studio.py). They skip when /usr/bin/chromium is absent."""

import re

import pytest

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, LiveStudio

# Playwright polls a bare wait_for_function expression ("x.length > 3") with eval() inside the page,
# which the studio's Content-Security-Policy (script-src 'self', no 'unsafe-eval') refuses; a function
# ("() => x.length > 3") is compiled through the DevTools protocol instead. Tests keep writing either.
_FUNCTION = re.compile(r"\s*(async\s+)?(function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>)")


def _as_function(wait_for_function):
    def wait(self, expression, *args, **kwargs):
        if isinstance(expression, str) and not _FUNCTION.match(expression):
            expression = f"() => ({expression})"
        return wait_for_function(self, expression, *args, **kwargs)

    return wait


def _patch_wait_for_function() -> None:
    from playwright.sync_api import Frame, Page

    for cls in (Page, Frame):
        if not getattr(cls.wait_for_function, "as_function", False):
            cls.wait_for_function = _as_function(cls.wait_for_function)
            cls.wait_for_function.as_function = True


_patch_wait_for_function()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """A studio of the module's own, without a worker (modules that train override this)."""
    live = LiveStudio(tmp_path_factory.mktemp("studio")).start(worker=False)
    yield live
    live.stop()
