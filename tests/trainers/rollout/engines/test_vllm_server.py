"""The client of a separate vLLM server, against a real vLLM server on localhost (CPU build here)."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from transformers import AutoModelForCausalLM

from launcher.processes import free_port
from tests.trainers.helpers import engine_trainer_gap
from trainers.rollout.engines.base import SamplingParams
from trainers.rollout.engines.vllm_server import VLLMServerClient, VLLMServerError

PROMPTS = [[1, 5, 6, 7], [1, 8, 9]]


@pytest.fixture
def served_weights(vllm_server, tiny_model_path):
    """Puts the tiny model's own weights back on the shared server after a test that pushes others."""
    yield
    vllm_server.client.push_weights(AutoModelForCausalLM.from_pretrained(tiny_model_path).state_dict().items())


def test_it_returns_n_samples_per_prompt_capped_at_max_tokens_with_their_logprobs(vllm_server):
    out = vllm_server.client.generate(PROMPTS, 3, SamplingParams(max_new_tokens=6, logprobs=True), seed=1)
    assert [len(group) for group in out] == [3, 3]
    for g in (g for group in out for g in group):
        assert 1 <= len(g.token_ids) <= 6
        assert len(g.logprobs) == len(g.token_ids)
        assert all(lp <= 0 for lp in g.logprobs)
        assert g.finish_reason == ("length" if len(g.token_ids) == 6 else "stop")
    assert len({tuple(g.token_ids) for g in out[0]}) == 3  # the samples of a group differ


def test_logprobs_are_left_out_unless_asked_for(vllm_server):
    out = vllm_server.client.generate(PROMPTS, 1, SamplingParams(max_new_tokens=4), seed=1)
    assert all(g.logprobs is None for group in out for g in group)


def test_a_seed_reproduces_its_samples_and_each_prompt_gets_its_own(vllm_server):
    params = SamplingParams(max_new_tokens=8)
    same_prompt_twice = [PROMPTS[0], PROMPTS[0]]
    first = vllm_server.client.generate(same_prompt_twice, 2, params, seed=5)
    again = vllm_server.client.generate(same_prompt_twice, 2, params, seed=5)
    other = vllm_server.client.generate(same_prompt_twice, 2, params, seed=6)
    ids = lambda out: [[g.token_ids for g in group] for group in out]  # noqa: E731
    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    # One seed for the whole request would draw the same noise for both copies of the prompt.
    assert ids(first)[0] != ids(first)[1]


def test_a_stop_string_ends_the_completion_before_it(vllm_server, tiny_tokenizer):
    greedy = SamplingParams(max_new_tokens=16, temperature=0)
    (free,) = vllm_server.client.generate([PROMPTS[0]], 1, greedy)[0]
    text = free.text
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip(), f"need a visible stop string from {text!r}"
    with_stop = SamplingParams(max_new_tokens=16, temperature=0, stop=[stop])
    (cut,) = vllm_server.client.generate([PROMPTS[0]], 1, with_stop)[0]
    assert cut.finish_reason == "stop"
    assert cut.text == text[: text.index(stop)]
    assert len(cut.token_ids) < len(free.token_ids)


@pytest.mark.usefixtures("served_weights")
def test_pushed_weights_are_what_the_server_samples_from(vllm_server, tiny_model_path, tiny_tokenizer):
    trained = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    original = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    torch.manual_seed(0)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    sent = vllm_server.client.push_weights(trained.state_dict().items(), chunk_bytes=256 * 1024)
    assert sent == len(trained.state_dict())
    groups = vllm_server.client.generate(PROMPTS, 4, SamplingParams(max_new_tokens=12, logprobs=True), seed=3)
    pad = tiny_tokenizer.pad_token_id
    new_gap, old_gap = (
        engine_trainer_gap(trained, PROMPTS, groups, pad),
        engine_trainer_gap(original, PROMPTS, groups, pad),
    )
    print(f"\nserver vs trainer |logprob gap| per token: pushed weights {new_gap:.2e}, original {old_gap:.2e}")
    assert new_gap < 1e-4 < 1e-2 < old_gap


class _NoDevMode(BaseHTTPRequestHandler):
    """A server that generates but has no dev-mode endpoints: what `vllm serve` is without
    VLLM_SERVER_DEV_MODE=1 (404 on /collective_rpc)."""

    def do_POST(self):  # noqa: N802
        self.send_response(404)
        self.end_headers()
        self.wfile.write(b'{"detail": "Not Found"}')

    def log_message(self, *args):
        pass


def test_a_server_without_dev_mode_gets_an_error_that_says_how_to_start_it(tiny_model_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoDevMode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    try:
        with pytest.raises(VLLMServerError, match="VLLM_SERVER_DEV_MODE=1"):
            VLLMServerClient(f"http://127.0.0.1:{server.server_port}").push_weights(model.state_dict().items())
    finally:
        server.shutdown()


def test_an_unreachable_server_is_named_in_the_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(VLLMServerError, match=f"cannot reach the vLLM server at {url}"):
        VLLMServerClient(url, timeout=2).generate(PROMPTS, 1, SamplingParams())
