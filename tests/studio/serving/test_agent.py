"""The web process's half of "use the run's tools" (studio.serving.agent): which runs offer it, and a
turn's text given back to the environment as the model wrote it (the engine drops the stop string)."""

from __future__ import annotations

from studio.runs.models import Run
from studio.serving import agent, bodies, pages
from tests.studio.base import StudioTestCase

TOOLS = {"kind": "tools", "params": {"tools": [{"kind": "calculator"}, {"kind": "python"}]}}


def test_only_a_run_with_a_tools_environment_offers_its_tools():
    assert agent.run_environment({"model": {}, "environment": TOOLS}) == TOOLS
    assert agent.run_environment({"environment": {"kind": "lookup"}}) is None
    assert agent.run_environment({"model": {}}) is None
    assert agent.run_environment(None) is None
    assert agent.tool_names(TOOLS) == ["calculator", "python"]
    assert agent.tool_names(None) == []


def test_an_open_call_gets_back_the_stop_string_the_engine_dropped():
    opened = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}'
    assert agent.closed(opened) == opened + "</tool_call>"
    assert agent.closed(opened + "</tool_call>") == opened + "</tool_call>"
    assert agent.closed("4") == "4"


class RunToolsPathPolicyTest(StudioTestCase):
    """The playground asks the path policy again each time it uses a run's tools, as a run's worker does
    before it reads: a search tool's corpus that has become a link into the studio's data folder since launch
    is refused, naming the field, and nothing is sent to the model server."""

    def test_a_tools_corpus_that_became_a_link_into_the_data_folder_is_refused(self):
        corpus = self.tmp / "docs.jsonl"
        corpus.write_text('{"title": "t", "text": "public"}\n')
        search = {"kind": "tools", "params": {"tools": [{"kind": "search", "params": {"dataset": str(corpus)}}]}}
        run = Run.objects.create(team=self.team, name="agent", spec={"environment": search}, state="succeeded")
        self.assertEqual(pages._run_tools({"use_run_tools": True}, run), search)

        secret = self.data_dir / "first-login.txt"
        secret.write_text("PASSWORD")
        corpus.unlink()
        corpus.symlink_to(secret)
        with self.assertRaises(bodies.BadField) as caught:
            pages._run_tools({"use_run_tools": True}, run)
        self.assertEqual(caught.exception.param, "use_run_tools")
        self.assertIn("params.tools.0.params.dataset", str(caught.exception))
        self.assertIn("data folder", str(caught.exception))
        self.assertIsNone(pages._run_tools({"use_run_tools": False}, run))  # not asked for: not checked
