"""The home page and the README name the demos to try first in the same order (issue 39: the home page
said "a tiny model learns in about a minute" while the README began with the real model)."""

from __future__ import annotations

import re
from pathlib import Path

from studio.bootstrap import DEMOS
from studio.experiments.models import Experiment
from tests.studio.base import StudioTestCase

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_presents_the_demos_in_the_home_pages_order():
    text = re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))
    places = [text.find(name) for name, _ in DEMOS]
    assert -1 not in places, dict(zip([n for n, _ in DEMOS], places, strict=True))
    assert places == sorted(places)


class HomeDemosTest(StudioTestCase):
    def test_the_home_page_lists_the_teams_demos_in_that_order_with_what_each_shows(self):
        for name, _ in reversed(DEMOS):  # made in another order than shown
            Experiment.objects.create(team=self.team, name=name, dataset=self.dataset, rubric=self.rubric,
                                      model_path="/models/tiny", config={}, created_by=self.alice)  # fmt: skip
        self.client.force_login(self.carol)
        page = self.client.get("/").content.decode()
        listed = re.search(r"<ol data-demos>(.*?)</ol>", page, re.S).group(1)
        assert re.findall(r'<a href="/experiments/\d+/">([^<]+)</a>', listed) == [name for name, _ in DEMOS]
        assert "its reward rises within a minute on a CPU" in listed
        assert "tiny model learns in about a minute" not in page

    def test_without_demos_the_home_page_lists_none(self):
        self.client.force_login(self.carol)
        assert "data-demos" not in self.client.get("/").content.decode()
