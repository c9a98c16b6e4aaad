"""Browser tests drive Debian's headless Chromium (never a downloaded browser) with Playwright
against a live studio (tests/browser/live_studio.py). They skip when /usr/bin/chromium is absent."""

import pytest

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, LiveStudio


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
