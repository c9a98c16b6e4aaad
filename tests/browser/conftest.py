"""Browser tests drive Debian's headless Chromium (never a downloaded browser) with Playwright
against a live studio (tests/browser/live_studio.py). They skip when /usr/bin/chromium is absent."""

import pytest

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()
