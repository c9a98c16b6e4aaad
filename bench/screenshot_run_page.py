"""Retake the README screenshots from a REAL run of the studio's demo, while it is live.

Not a test (nothing runs it automatically). Start a studio first, on a spare port and its
own data dir, then point this script at it:

    STUDIO_DATA_DIR=/tmp/shot-var STUDIO_PORT=8765 STUDIO_ADMIN_PASSWORD=shot-pass-123 ./studioctl up &
    .venv/bin/python bench/screenshot_run_page.py --base http://127.0.0.1:8765 --password shot-pass-123

It logs in through the API for a token, launches the demo experiment with more steps (so the
run is still learning when the shot is taken), signs in through the login page in Debian's
Chromium, opens the run page at 1680x1050, waits for --min-steps steps (the curves extended
live) and writes docs/run-page.png, then reloads and opens the newest rollout (of --rollout-step or earlier) in the inspector
for docs/run-page-rollout.png.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

DOCS = Path(__file__).resolve().parent.parent / "docs"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip


def api(base: str, path: str, token: str | None = None, body: dict | None = None, form: dict | None = None):
    headers = {"Authorization": f"Token {token}"} if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(base + path, data=data, headers=headers)) as resp:
        return json.load(resp)


def launch_demo(base: str, username: str, password: str, total_steps: int) -> int:
    """The demo experiment launched with `total_steps`; returns the new run's id."""
    token = api(base, "/api/token/", form={"username": username, "password": password})["token"]
    listing = api(base, "/api/experiments/", token)
    experiments = listing["results"] if isinstance(listing, dict) else listing
    demo = next(e for e in experiments if e["name"].startswith("Demo"))
    run = api(
        base,
        f"/api/experiments/{demo['id']}/launch/",
        token,
        body={"overrides": {"optim": {"total_steps": total_steps}}},
    )
    return run["id"]


def shoot(
    base: str, username: str, password: str, run_id: int, min_steps: int, rollout: bool, rollout_step: int = 0
) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1680, "height": 1050}, color_scheme="light").new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(f"{base}/login/?next=/runs/{run_id}/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_selector("body[data-ready='1']", timeout=60_000)
        deadline = time.monotonic() + 600
        while int(page.text_content("[data-run-step]").split("/")[0]) < min_steps:
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run_id} did not reach {min_steps} steps in 10 minutes")
            time.sleep(2)
        page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
        page.screenshot(path=str(DOCS / "run-page.png"))
        if rollout:
            # The list keeps the rows it opened with (new ones wait behind a "show them" bar):
            # reload so the newest rollouts, from a model that has learned, are on top.
            page.reload()
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            page.wait_for_selector(".rollout-list tbody tr[data-rollout-id]")
            if rollout_step:  # rollouts from mid-training: rewards and advantages still spread
                page.fill("input[name=step_max]", str(rollout_step))
                page.wait_for_function(
                    f"+document.querySelector('.rollout-list tbody tr[data-rollout-id] td')?.textContent <= {rollout_step}"
                )
                page.evaluate("document.activeElement.blur()")  # j/k are ignored while typing in a field
            page.keyboard.press("j")
            page.keyboard.press("Enter")
            page.wait_for_selector(".rollout-detail .completion")
            time.sleep(1)  # the open completion scrolls into view
            page.screenshot(path=str(DOCS / "run-page-rollout.png"))
        if errors:
            print("page errors:", *errors, sep="\n  ")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="http://127.0.0.1:8765")
    parser.add_argument("--username", default="admin")
    parser.add_argument("--password", required=True)
    parser.add_argument("--total-steps", type=int, default=150, help="steps of the launched run")
    parser.add_argument("--min-steps", type=int, default=70, help="steps in before the screenshot")
    parser.add_argument("--run", type=int, help="shoot this run instead of launching one")
    parser.add_argument("--rollout-step", type=int, default=0, help="open a rollout of this step or earlier")
    parser.add_argument("--no-rollout", action="store_true", help="skip docs/run-page-rollout.png")
    args = parser.parse_args()
    run_id = args.run or launch_demo(args.base, args.username, args.password, args.total_steps)
    print(f"run {run_id}: {args.base}/runs/{run_id}/")
    shoot(args.base, args.username, args.password, run_id, args.min_steps, not args.no_rollout, args.rollout_step)


if __name__ == "__main__":
    main()
