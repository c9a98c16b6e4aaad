"""The run's HTML report opens in a real browser from a file, with the network cut off: plotly.js
(inlined) draws every curve panel and the page asks for nothing outside the file. The run has one
step: its report drew lines only and looked empty (issue 39); each panel now marks its point."""

from __future__ import annotations

import pytest

from tests.browser.live_studio import requires_chromium

pytestmark = [pytest.mark.slow, requires_chromium]


def test_the_report_draws_its_curves_offline_and_marks_a_lone_step(browser, studio, tmp_path):
    with studio.synthetic_run(1, 1, 0.0) as run:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([{"name": "sessionid", "value": run["session"], "url": studio.base_url}])
        answer = context.request.get(f"{studio.base_url}/api/runs/{run['run']}/report/")
        assert answer.status == 200 and "attachment" in answer.headers["content-disposition"]
        report = tmp_path / "report.html"
        report.write_bytes(answer.body())
        asked: list[str] = []

        def refuse(route):  # anything but the file itself: recorded and cut off
            asked.append(route.request.url)
            route.abort()

        context.route(lambda url: not url.startswith("file://"), refuse)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.goto(report.as_uri())
        page.wait_for_selector(".curve .main-svg", timeout=20_000)
        panels = page.eval_on_selector_all(".curve", "nodes => nodes.length")
        drawn = page.eval_on_selector_all(".curve.js-plotly-plot", "nodes => nodes.length")
        assert panels >= 2 and drawn == panels  # one panel per metric namespace, each drawn
        marked = page.eval_on_selector_all(".curve", "nodes => nodes.map((n) => n.querySelectorAll('.point').length)")
        assert all(marked), marked  # one step: a marker in every panel, not an empty line
        ranges = page.eval_on_selector_all(".curve", "nodes => nodes.map((n) => n._fullLayout.xaxis.range)")
        assert all(r == [0.5, 1.5] for r in ranges), ranges
        assert set(page.locator(".curve .xtick text").all_text_contents()) == {"1"}
        assert page.locator("[data-rollout]").count() >= 2  # the last steps' best and worst
        assert (asked, errors) == ([], [])
        context.close()
