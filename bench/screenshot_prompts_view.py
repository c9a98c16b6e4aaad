"""Retake the README's screenshot of a run's prompts view (docs/prompts-view.png).

Not a test (nothing runs it automatically). It starts a studio of its own (tests/browser/live_studio.py:
daphne, a private Redis, a SQLite file in a temp folder) and feeds it the browser test's synthetic
run in its `prompts` mode: a pool of 12 arithmetic rows of fixed difficulty (three always answered
right, three never, the rest half the time) whose per-prompt statistics come from the trainer's own
`trainers.curriculum.stats.PromptBook`. The rows, rollouts and statistics are synthetic, the page,
API and numbers shown are the studio's. Then it opens the prompts view in Debian's Chromium at
1680x1050, sorted by pass rate, and writes the PNG.

    .venv/bin/python bench/screenshot_prompts_view.py [--steps 40]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS, LiveStudio  # noqa: E402

DOCS = ROOT / "docs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="steps of history written before the shot")
    parser.add_argument("--out", type=Path, default=DOCS / "prompts-view.png")
    args = parser.parse_args()
    studio = LiveStudio(Path(tempfile.mkdtemp(prefix="shot-prompts-"))).start(worker=False)
    try:
        with studio.synthetic_run(args.steps, args.steps + 100, 3600.0, prompts=True) as run, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1680, "height": 1050}, color_scheme="light")
            context.add_cookies([{"name": "sessionid", "value": run["session"], "url": studio.base_url}])
            page = context.new_page()
            page.goto(f"{studio.base_url}/runs/{run['run']}/prompts/")
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            with page.expect_response(lambda r: "order=pass_rate" in r.url):
                page.select_option("form.prompts-filters [name=order]", "pass_rate")
            page.wait_for_function("!document.querySelector('[data-prompts]').classList.contains('is-loading')")
            page.screenshot(path=str(args.out), full_page=False)
            print(f"wrote {args.out}")
            browser.close()
    finally:
        studio.stop()


if __name__ == "__main__":
    main()
