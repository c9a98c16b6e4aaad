"""The rules the pages hand their JS (studio.sharing.client_rules) are the server's own: the
parameters rollout_query reads, the note limits the model and the API enforce, and each page
that loads the JS carries them."""

import json
import re

import pytest
from django.http import QueryDict

from studio.runs import rollout_query
from studio.runs.models import Rollout
from studio.sharing.api import NoteIn
from studio.sharing.client_rules import client_rules
from studio.sharing.models import SUGGESTED_TAGS, Note, ShareLink
from tests.studio.records import prompt_of
from tests.studio.sharing.test_pages import page_config

RULES = client_rules()


class ReadsRecorded(dict):
    """An empty query string that notes the name of every parameter read from it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def rule_params(rules: dict) -> set[str]:
    criterion, notes = rules["criterion"], rules["notes"]
    return {
        *(b["param"] for b in rules["bounds"]),
        *rules["equals"],
        *rules["flags"],
        *rules["counts"],
        *(m["param"] for m in rules["members"]),
        criterion["param"],
        criterion["min"],
        criterion["max"],
        rules["text"],
        notes["any"],
        notes["tag"],
        rules["prompt"]["param"],
        rules["split"]["param"],
        "order",
    }


def test_the_filter_parameters_are_exactly_those_rollout_query_reads(run):
    params = ReadsRecorded()
    rollout_query.page(run.pk, params)
    # limit and cursor page the list; they filter nothing, so the inspector handles them itself.
    assert params.read == rule_params(RULES["rollouts"]) | {"limit", "cursor"}


def test_the_bounds_say_which_field_each_parameter_limits_and_which_way(run):
    rows = [Rollout.objects.create(run=run, step=s, prompt_id="p", sample_index=0, run_prompt=prompt_of(run, ""), completion="",
                                   reward=s / 10) for s in range(6)]  # fmt: skip
    for bound in RULES["rollouts"]["bounds"]:
        value = getattr(rows[3], bound["field"])
        got = rollout_query.page(run.pk, QueryDict(f"{bound['param']}={value}&limit=100"))["results"]
        want = [r for r in rows if (getattr(r, bound["field"]) >= value if bound["bound"] == "min"
                                    else getattr(r, bound["field"]) <= value)]  # fmt: skip
        assert sorted(r["id"] for r in got) == sorted(r.pk for r in want), bound


def test_the_orders_are_the_apis_and_the_default_is_newest_first():
    rules = RULES["rollouts"]
    assert rules["orders"] == list(rollout_query.ORDERS)
    assert rules["default_order"] == rollout_query.DEFAULT_ORDER == "-step"


def test_the_note_limits_are_the_models_and_the_apis():
    notes = RULES["notes"]
    assert notes["tag_max"] == Note._meta.get_field("tag").max_length == NoteIn().fields["tag"].max_length
    assert notes["text_max"] == Note._meta.get_field("text").max_length == NoteIn().fields["text"].max_length
    assert notes["suggested_tags"] == list(SUGGESTED_TAGS)
    assert set(notes["quick_tags"]) <= set(SUGGESTED_TAGS)


def test_a_tag_of_the_announced_length_is_kept_and_one_longer_refused(api, alice, run):
    api.force_authenticate(alice)
    tag_max = RULES["notes"]["tag_max"]
    url = f"/api/runs/{run.pk}/notes/"
    assert api.post(url, {"text": "x", "tag": "t" * tag_max}, format="json").status_code == 201
    resp = api.post(url, {"text": "x", "tag": "t" * (tag_max + 1)}, format="json")
    assert resp.status_code == 400 and "tag" in resp.json()


def test_the_panels_are_json_the_page_can_read():
    assert json.loads(json.dumps(RULES["panels"])) == RULES["panels"]
    assert len({p["id"] for p in RULES["panels"]}) == len(RULES["panels"])
    assert all(set(p) == {"id", "title", "pattern", "stacked"} for p in RULES["panels"])


@pytest.fixture
def pages(client, alice, run):
    """The HTML of each page that loads the rules' JS: the run page, the shared run page, compare."""
    client.force_login(alice)
    link = ShareLink.objects.create(run=run, created_by=alice)
    return {
        "run": client.get(f"/runs/{run.pk}/").content.decode(),
        "compare": client.get(f"/compare/?runs={run.pk}").content.decode(),
        "share": client.__class__().get(f"/share/{link.token}/").content.decode(),
    }


def test_every_page_that_loads_the_js_carries_the_rules(pages):
    for name, html in pages.items():
        assert page_config(html, "client-rules") == RULES, name


@pytest.mark.parametrize("page", ["run", "share"])
def test_the_run_pages_forms_use_the_rules(pages, page):
    html = pages[page]
    notes = RULES["notes"]
    if page == "run":  # the owner's page has the note form; the guest's has none
        form = re.search(r"<form class=\"note-form\" data-note-form>.*?</form>", html, re.S).group(0)
        assert f'maxlength="{notes["tag_max"]}"' in form and f'maxlength="{notes["text_max"]}"' in form
    datalist = re.search(r'<datalist id="note-tags">(.*?)</datalist>', html, re.S).group(1)
    assert re.findall(r'<option value="([^"]*)">', datalist) == notes["suggested_tags"]
    sort = re.search(r'<select name="order">(.*?)</select>', html, re.S).group(1)
    options = re.findall(r'<option value="([^"]*)"( selected)?>', sort)
    assert sorted(value for value, _ in options) == sorted(RULES["rollouts"]["orders"])
    assert [value for value, selected in options if selected] == [RULES["rollouts"]["default_order"]]
