"""An episode as the environment's "Try it" shows it (environments/episode.html): each tool result and error
once, in its call's box (issue 39: a "Try it" error appeared three times: the call's error, its result and
the observation's tool message; a result twice)."""

from __future__ import annotations

from django.template import Context, Template
from django.test import SimpleTestCase

TRIED = Template(
    '{% for group in groups %}{% for episode in group %}{% include "environments/episode.html" %}{% endfor %}'
    "{% endfor %}"
)
ERROR = "ZeroDivisionError: division by zero"


def episode() -> dict:
    failed = {"name": "python", "arguments": {"code": "print(1/0)"}, "error": ERROR, "result": f"error: {ERROR}"}
    worked = {"name": "calculator", "arguments": {"expression": "20 + 19"}, "result": "39", "error": None}
    return {
        "end_reason": "done", "error": "", "messages": [{"role": "user", "content": "What is 20 + 19?"}],
        "turns": [
            {"text": "<tool_call>python</tool_call>", "num_tokens": 9, "finish_reason": "stop", "tool_calls": [failed],
             "observation": [{"role": "tool", "content": f"error: {ERROR}"}]},
            {"text": "<tool_call>calculator</tool_call>", "num_tokens": 9, "finish_reason": "stop",
             "tool_calls": [worked], "observation": [{"role": "tool", "content": "39"},
                                                      {"role": "user", "content": "Now say it in words."}]},
        ],
    }  # fmt: skip


class EpisodeViewTest(SimpleTestCase):
    def test_each_tool_result_and_error_shows_once(self):
        html = TRIED.render(Context({"groups": [[episode()]]}))
        self.assertEqual(html.count(ERROR), 1, html)
        self.assertEqual(html.count(">39<"), 1, html)
        self.assertIn("Now say it in words.", html)  # an observation that is not a tool's result still shows
