"""The OpenAI-compatible endpoint through the official `openai` client, against a real studio (daphne),
a real Celery worker and broker, and the model server process the worker starts (the transformers
server: vLLM's CPU build takes minutes to start on this machine's two cores). The model is a tiny
agent checkpoint cold-started to call the calculator."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import openai
import pytest

from launcher.processes import ROOT
from tests.studio.serving.served import CALCULATOR_QUESTION, build_calculator_model, start_serving_studio

pytestmark = pytest.mark.slow


def _calculator_schema() -> dict:
    from trainers.rollout.environments.base import EpisodeLimits
    from trainers.rollout.environments.kinds.tools import ToolsEnvironment

    env = ToolsEnvironment.create({"tools": [{"kind": "calculator"}], "formats": ["hermes"]}, EpisodeLimits())
    return env.tools[0].schemas()[0]


# The calculator as a client offers it: the schema the training environment showed the model.
CALCULATOR = _calculator_schema()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    models = build_calculator_model(tmp_path_factory.mktemp("calculator"))
    studio, records = start_serving_studio(tmp_path_factory.mktemp("studio"), models)
    yield studio, records
    studio.stop()


def client(served, who: str = "ana") -> openai.OpenAI:
    studio, records = served
    return openai.OpenAI(base_url=f"{studio.base_url}/v1", api_key=records["keys"][who], max_retries=0, timeout=180)


def checkpoint(served, team: str = "Ana's lab") -> str:
    return f"run-{served[1]['runs'][team]}/step-4"


def base(served) -> str:
    """The run's base model: untrained, it writes on where the checkpoint soon ends its turn."""
    run = served[1]["runs"]["Ana's lab"]
    return f"run-{run}/base"


def test_the_environment_and_the_server_render_tools_alike():
    """The model learnt the tools environment's system message; the server must write the same one."""
    from trainers.rollout.environments.base import EpisodeLimits
    from trainers.rollout.environments.kinds.tools import ToolsEnvironment
    from workers.serving.chat import plain_messages

    env = ToolsEnvironment.create({"tools": [{"kind": "calculator"}], "formats": ["hermes"]}, EpisodeLimits())
    user = {"role": "user", "content": CALCULATOR_QUESTION}
    assert plain_messages([user], [CALCULATOR]) == env.reset({"messages": [user]}).messages


def test_models_lists_the_teams_own(served):
    names = [m.id for m in client(served).models.list()]
    ana, ben = served[1]["runs"]["Ana's lab"], served[1]["runs"]["Ben's lab"]
    assert names == [f"run-{ana}/base", f"run-{ana}/step-4"]
    assert [m.id for m in client(served, "ben").models.list()] == [f"run-{ben}/base", f"run-{ben}/step-4"]


def test_chat_completion_not_streamed(served):
    started = time.monotonic()
    answer = client(served).chat.completions.create(
        model=checkpoint(served),
        messages=[{"role": "user", "content": "Say yes"}],
        max_tokens=6,
        seed=3,
        temperature=0.8,
    )
    print(f"first answer (model server started on first use) in {time.monotonic() - started:.1f} s")
    assert answer.model == checkpoint(served)
    assert answer.choices[0].message.role == "assistant"
    assert isinstance(answer.choices[0].message.content, str)
    assert answer.usage.completion_tokens <= 6
    again = client(served).chat.completions.create(
        model=checkpoint(served),
        messages=[{"role": "user", "content": "Say yes"}],
        max_tokens=6,
        seed=3,
        temperature=0.8,
    )
    assert again.choices[0].message.content == answer.choices[0].message.content  # the seed is honoured


def test_chat_completion_streamed_piece_by_piece(served):
    stream = client(served).chat.completions.create(
        model=base(served),
        messages=[{"role": "user", "content": "Count"}],
        max_tokens=12,
        stream=True,
        temperature=1.0,
        seed=0,
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 2, "the reply came in one piece, not as it was generated"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    whole = client(served).chat.completions.create(
        model=base(served),
        messages=[{"role": "user", "content": "Count"}],
        max_tokens=12,
        temperature=1.0,
        seed=0,
    )
    assert "".join(pieces) == whole.choices[0].message.content


def test_completions_streamed_and_not(served):
    plain = client(served).completions.create(model=base(served), prompt="the answer", max_tokens=5,
                                              temperature=0, n=2)  # fmt: skip
    assert [c.index for c in plain.choices] == [0, 1]
    assert plain.choices[0].text == plain.choices[1].text  # greedy: the same twice
    streamed = client(served).completions.create(model=base(served), prompt="the answer", max_tokens=5,
                                                 temperature=0, stream=True)  # fmt: skip
    assert "".join(c.choices[0].text for c in streamed if c.choices) == plain.choices[0].text


def test_a_tool_call_comes_back_in_the_openai_shape(served):
    answer = client(served).chat.completions.create(
        model=checkpoint(served),
        messages=[{"role": "user", "content": CALCULATOR_QUESTION}],
        tools=[CALCULATOR],
        temperature=0,
        max_tokens=40,
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message.content
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "calculator"
    assert json.loads(call.function.arguments) == {"expression": "2+2"}
    # The call's result goes back as a tool message; the model answers from it.
    follow = client(served).chat.completions.create(
        model=checkpoint(served), tools=[CALCULATOR], temperature=0, max_tokens=10,
        messages=[{"role": "user", "content": CALCULATOR_QUESTION}, choice.message.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": call.id, "content": "4"}],
    )  # fmt: skip
    assert follow.choices[0].message.content.strip() == "4"


def test_a_token_without_the_inference_scope_is_refused(served):
    with pytest.raises(openai.PermissionDeniedError) as refused:
        client(served, "ana_read").chat.completions.create(
            model=checkpoint(served), messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
    assert "inference" in refused.value.message
    assert [m.id for m in client(served, "ana_read").models.list()]  # listing is its scope


def test_another_teams_checkpoint_is_refused(served):
    with pytest.raises(openai.NotFoundError) as refused:
        client(served, "ben").chat.completions.create(
            model=checkpoint(served, "Ana's lab"), messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
    assert refused.value.body["param"] == "model"


def test_no_token_or_a_wrong_one_is_refused(served):
    studio, _ = served
    bad = openai.OpenAI(base_url=f"{studio.base_url}/v1", api_key="rs-not-a-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    assert httpx.get(f"{studio.base_url}/v1/models").status_code == 401


@pytest.mark.parametrize(("field", "value"), [
    ("temperature", 5), ("max_tokens", 0), ("n", 99), ("stop", ["a", "b", "c", "d", "e"]), ("top_p", "high"),
    ("messages", []), ("logit_bias", {"1": 5}),
])  # fmt: skip
def test_a_bad_field_is_answered_400_naming_it(served, field, value):
    body = {"model": checkpoint(served), "messages": [{"role": "user", "content": "hi"}], field: value}
    with pytest.raises(openai.BadRequestError) as refused:
        client(served).chat.completions.create(**body)
    assert refused.value.body["param"] == field
    assert field in refused.value.message


def test_a_bad_message_is_named_with_its_place(served):
    with pytest.raises(openai.BadRequestError) as refused:
        client(served).chat.completions.create(model=checkpoint(served), messages=[
            {"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}])  # fmt: skip
    assert refused.value.body["param"] == "messages[1].role"


def test_the_idle_server_is_stopped_and_started_again_on_use(served):
    studio, _ = served
    studio.shell("from datetime import timedelta\nfrom django.utils import timezone\n"
                 "from studio.serving.models import ModelServer\n"
                 "ModelServer.objects.update(last_used=timezone.now() - timedelta(hours=1))")  # fmt: skip
    probe = "from studio.serving.models import ModelServer\nprint(sorted(set(ModelServer.objects.values_list('state', flat=True))))"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = subprocess.run([sys.executable, "manage.py", "shell", "-c", probe], cwd=ROOT, env=studio.env,
                                capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]  # fmt: skip
        if states == "['stopped']":
            break
        time.sleep(1)
    assert states == "['stopped']", studio.logs()
    answer = client(served).chat.completions.create(model=checkpoint(served), max_tokens=2,
                                                    messages=[{"role": "user", "content": "hi"}])  # fmt: skip
    assert answer.choices[0].message.content is not None
