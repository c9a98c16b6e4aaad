"""Calculator episodes with SmolLM2-135M-Instruct through `run_episodes` (trainers.rollout.generate)
and the `tools` environment: the token ids an episode holds are the template's render of its
conversation, and the model's own greedy turns, whatever they say, are handled without error."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainers.data.prompts import Prompt, encode_chat
from trainers.data.rows import PromptRow
from trainers.rollout.engines.base import Generation, RolloutEngine, SamplingParams
from trainers.rollout.engines.hf import HFEngine
from trainers.rollout.environments.tool_calls import parse_tool_calls
from trainers.rollout.generate import run_episodes
from trainers.rollout.turn_tokens import observation_token_ids
from trainers.spec import EnvironmentSpec

QUESTION = "What is 17 * 23? Use the calculator."
CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "17 * 23"}}\n</tool_call>'
ANSWER = "17 * 23 = 391."


@pytest.fixture(scope="module")
def tokenizer(real_model_path):
    return AutoTokenizer.from_pretrained(real_model_path)


def calculator(max_turns=3, max_turn_tokens=48) -> EnvironmentSpec:
    return EnvironmentSpec(
        kind="tools", params={"tools": [{"kind": "calculator"}]}, max_turns=max_turns,
        max_turn_tokens=max_turn_tokens, max_episode_tokens=512,
    )  # fmt: skip


def prompt(tokenizer) -> Prompt:
    messages = [{"role": "user", "content": QUESTION}]
    row = PromptRow(id="q", row=1, prompt=messages, fields={"answer": "391"})
    return Prompt(row=row, text=QUESTION, token_ids=encode_chat(tokenizer, messages)[1])


class Scripted(RolloutEngine):
    """Turn k of every episode: `turns[k]`, as a real engine returns it (the Hermes call stopped on
    "</tool_call>", kept in the text; the answer ended by EOS, which the text leaves out)."""

    def __init__(self, tokenizer, turns: list[list[int]]):
        self.tokenizer, self.turns, self.calls = tokenizer, turns, 0

    def generate(self, prompts, n, params):
        ids = self.turns[self.calls]
        self.calls += 1
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return [[Generation(list(ids), text, None, "stop") for _ in range(n)] for _ in prompts]


def test_an_episodes_tokens_are_the_templates_render_of_its_conversation(tokenizer):
    call_ids = tokenizer(CALL, add_special_tokens=False).input_ids
    answer_ids = tokenizer(ANSWER, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
    turns = [call_ids, answer_ids]
    (episode,), = run_episodes(Scripted(tokenizer, turns), tokenizer, [prompt(tokenizer)], 1,
                               SamplingParams(max_new_tokens=48), calculator())  # fmt: skip
    assert (episode.end_reason, episode.error) == ("done", None)
    call = episode.turns[0].tool_calls[0]
    assert (call.name, call.arguments, call.error) == ("calculator", {"expression": "17 * 23"}, None)
    assert call.result == "391"
    # The tools environment wrote its own system message (its tools prompt): the template's default one is not added.
    assert [m["role"] for m in episode.messages] == ["system", "user"]
    conversation = episode.messages + episode.transcript()
    assert [m["role"] for m in conversation] == ["system", "user", "assistant", "tool", "assistant"]
    rendered = tokenizer.apply_chat_template(conversation, tokenize=False)
    assert rendered.count("<|im_start|>system\n") == 1 and "SmolLM" not in rendered
    newline = tokenizer("\n", add_special_tokens=False).input_ids
    # Nothing samples the newline after the final <|im_end|>; every other token is the render's.
    expected = tokenizer(rendered, add_special_tokens=False).input_ids
    assert episode.prompt_ids + episode.completion_ids + newline == expected
    observed = len(episode.turns[0].observation_ids)
    assert episode.trained_mask == [1] * len(call_ids) + [0] * observed + [1] * len(answer_ids)


@pytest.mark.slow
def test_the_models_own_greedy_turns_in_a_calculator_episode_are_handled(real_model_path, tokenizer):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(real_model_path, dtype=torch.float32)
    engine = HFEngine(model=model, tokenizer=tokenizer)
    (episode,), = run_episodes(engine, tokenizer, [prompt(tokenizer)], 1,
                               SamplingParams(max_new_tokens=48, temperature=0.0), calculator())  # fmt: skip
    print("\n" + "\n".join(f"turn {i}: {t.text!r} -> {t.reason}" for i, t in enumerate(episode.turns)))
    assert episode.error is None and episode.end_reason in ("done", "turn_limit", "token_budget")
    assert 1 <= len(episode.turns) <= 3
    for turn in episode.turns:
        assert 1 <= len(turn.token_ids) <= 48
        assert [c.name for c in turn.tool_calls] == [c.name for c in parse_tool_calls(turn.text, ["hermes"])]
        if turn.observation_ids:  # what followed it: the template's delta, its contents as text
            assert turn.observation_ids == observation_token_ids(tokenizer, turn.observation, turn.token_ids[-1])
            assert tokenizer.decode(turn.observation_ids).endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert len(episode.completion_ids) == len(episode.trained_mask) <= 512
