"""The environment editor keeps what was typed and says what each structured field holds: a
multi-line prompt comes back line for line (through the form, the page and the API), the tools list
shows the registered tool kinds with an example and takes bare names as shorthand, and the python
environment's code box says what reset(row) and step(text) receive (issue 27)."""

from __future__ import annotations

import html
import json
import re

from studio.environments.forms import params_fields, tools_shorthand
from studio.environments.models import Environment
from studio.experiments.forms import experiment_sections, read_experiment_config
from studio.lib.schema_form import read_fields
from tests.studio.base import StudioTestCase
from trainers.data.procedural.catalog import TASKS
from trainers.rollout.environments.catalog import QWEN_TOOLS_PROMPT, TOOL_KINDS

# A prompt with blank lines, indentation, a leading line break and a trailing one.
PROMPT = "\n# Tools\n\nYou may call these:\n<tools>\n{tools}\n</tools>\n\n  Reply with <tool_call>{...}</tool_call>.\n"
SYSTEM = "You are careful.\nCheck each sum twice."


def textarea(page: str, name: str) -> str:
    """A textarea's value as a browser reads it (the parser drops one line break after the tag)."""
    match = re.search(rf'<textarea id="{re.escape(name)}"[^>]*>(.*?)</textarea>', page, re.S)
    assert match, f"no textarea {name}"
    return html.unescape(match.group(1)).removeprefix("\n")


def browser_text(text: str) -> str:
    """A textarea's value as a browser submits it: each line break as CR LF."""
    return text.replace("\n", "\r\n")


class ToolsEnvironmentFormTest(StudioTestCase):
    def form(self, **fields):
        body = {"team": self.team.pk, "name": "agent", "config.kind": "tools", "shown_kind": "tools",
                "config.params.tools": '[{"kind": "calculator"}]', "config.params.formats": "hermes",
                "config.params.system_prompt": browser_text(SYSTEM),
                "config.params.tools_prompt": browser_text(PROMPT), "action": "save"}  # fmt: skip
        return {**body, **fields}

    def test_a_multi_line_prompt_comes_back_identical_through_the_form_the_page_and_the_api(self):
        self.client.force_login(self.bob)
        response = self.client.post("/environments/new/", self.form())
        self.assertEqual(response.status_code, 302, response.context and response.context["errors"])
        saved = Environment.objects.get()
        self.assertEqual(saved.config["params"]["tools_prompt"], PROMPT)
        self.assertEqual(saved.config["params"]["system_prompt"], SYSTEM)
        page = self.client.get(f"/environments/{saved.pk}/").content.decode()
        self.assertEqual(textarea(page, "config.params.tools_prompt"), PROMPT)
        self.assertEqual(textarea(page, "config.params.system_prompt"), SYSTEM)
        api = self.client_for(self.carol).get(f"/api/environments/{saved.pk}/").json()
        self.assertEqual(api["config"]["params"]["tools_prompt"], PROMPT)
        # Saved again from the page as it was drawn: the same config, no new version.
        again = self.form(**{"config.params.tools_prompt": browser_text(textarea(page, "config.params.tools_prompt"))})
        self.client.post(f"/environments/{saved.pk}/", again)
        saved.refresh_from_db()
        self.assertEqual((saved.version, saved.config["params"]["tools_prompt"]), (1, PROMPT))

    def test_the_default_tools_prompt_is_drawn_as_several_lines(self):
        self.client.force_login(self.bob)
        page = self.client.post("/environments/new/", {"config.kind": "tools", "action": "refresh"}).content.decode()
        self.assertEqual(textarea(page, "config.params.tools_prompt"), QWEN_TOOLS_PROMPT)
        self.assertNotIn('<input type="text" id="config.params.tools_prompt"', page)

    def test_tool_names_are_shorthand_for_the_tools_list(self):
        self.client.force_login(self.bob)
        response = self.client.post("/environments/new/", self.form(**{"config.params.tools": "calculator, python"}))
        self.assertEqual(response.status_code, 302, response.context and response.context["errors"])
        tools = Environment.objects.get().config["params"]["tools"]
        self.assertEqual([t["kind"] for t in tools], ["calculator", "python"])

    def test_a_word_that_is_no_tool_kind_is_refused_beside_the_field_with_the_shape_and_the_kinds(self):
        self.client.force_login(self.bob)
        page = self.client.post("/environments/new/", self.form(**{"config.params.tools": "abacus"})).content.decode()
        field = page[page.index('data-field="config.params.tools"') :]
        error = html.unescape(field[field.index('<small class="error">') : field.index("</div>")])
        self.assertIn("unknown tool kind 'abacus'", error)
        self.assertIn('[{"kind": "calculator"}', error)  # the expected shape
        for kind in TOOL_KINDS.names():
            self.assertIn(kind, error)
        self.assertFalse(Environment.objects.exists())

    def test_the_tools_field_lists_the_registered_kinds_with_an_example(self):
        (field,) = [f for f in params_fields("tools", {}, {}) if f.name == "config.params.tools"]
        for kind in TOOL_KINDS.names():
            self.assertIn(f"{kind}:", field.help)
            self.assertIn(f'"kind": "{kind}"', field.placeholder)
        example = json.loads(field.placeholder)  # a tools list the schema accepts as it is shaped
        self.assertEqual(example[TOOL_KINDS.names().index("functions")]["params"]["code"][:4], "def ")
        self.assertIn("separated by commas", field.help)


def test_tools_shorthand_needs_settings_where_a_kind_has_required_ones():
    assert tools_shorthand("calculator") == [{"kind": "calculator"}]
    assert tools_shorthand(" calculator,python ") == [{"kind": "calculator"}, {"kind": "python"}]
    for text, said in (("functions", "needs settings (code)"), ("calc ulator", "unknown tool kind 'calc'"),
                       ("[{oops", "not a list of tools")):  # fmt: skip
        try:
            tools_shorthand(text)
        except ValueError as exc:
            assert said in str(exc), str(exc)
        else:
            raise AssertionError(f"{text!r} was accepted")


def test_the_python_environments_code_box_says_what_reset_and_step_receive_with_an_example():
    fields = {f.name: f for f in params_fields("python", {}, {})}
    code = fields["config.params.code"]
    assert code.widget == "textarea"
    assert 'row["messages"]' in code.help and "step(text)" in code.help
    assert "def reset(self, row)" in code.placeholder and "def step(self, text)" in code.placeholder
    assert fields["config.params.options"].placeholder  # an example of the keyword arguments


def test_a_code_box_keeps_its_text_exactly():
    fields = params_fields("python", {}, {})
    source = "class Env:\r\n    def reset(self, row):\r\n        return row['messages']\r\n\r\n    def step(self, text):\r\n        return None, 0.0, True\r\n"
    values, errors = read_fields(fields, {"config.params.code": source})
    assert not errors
    assert values["config"]["params"]["code"] == source.replace("\r\n", "\n")


def test_the_experiment_forms_system_prompt_is_several_lines_and_procedural_takes_a_task_name():
    fields = {f.name: f for _, section in experiment_sections({}, {}) for f in section}
    assert fields["data.system_prompt"].widget == "textarea"
    procedural = fields["data.procedural"]
    for task in TASKS.names():
        assert task in procedural.help
    assert '"task"' in procedural.placeholder
    config, errors = read_experiment_config(
        {"data.system_prompt": browser_text(SYSTEM), "data.procedural": TASKS.names()[0], "optim.total_steps": "3"}
    )
    assert not errors, errors
    assert config["data"]["system_prompt"] == SYSTEM
    assert config["data"]["procedural"] == {"task": TASKS.names()[0]}
    _, errors = read_experiment_config({"data.procedural": "algebra"})
    assert "unknown procedural task 'algebra'" in errors["data.procedural"]
    assert all(task in errors["data.procedural"] for task in TASKS.names())
