import pytest
import torch
from transformers import AutoModelForCausalLM

from trainers.engines.base import SamplingParams
from trainers.engines.vllm_server import VLLMServerClient, VLLMServerError

from .fake_vllm_server import EOS_ID, FakeVLLMServer

PROMPTS = [[5, 6, 7], [8, 9]]


def test_generate_returns_n_samples_per_prompt_in_prompt_order():
    with FakeVLLMServer() as server:
        out = VLLMServerClient(server.url).generate(PROMPTS, 2, SamplingParams(max_new_tokens=4, logprobs=True))
    assert [[g.text for g in group] for group in out] == [["p0s0", "p0s1"], ["p1s0", "p1s1"]]
    first, second = out[0]
    assert first.token_ids == [7, 0, EOS_ID] and first.finish_reason == "stop"
    assert second.token_ids == [7, 1, 7, 1] and second.finish_reason == "length"
    assert first.logprobs == pytest.approx([-0.1, -0.2, -0.3])


def test_token_ids_are_taken_from_the_token_ids_field_when_the_server_sends_it():
    with FakeVLLMServer(token_ids_field=True) as server:
        (group, _) = VLLMServerClient(server.url).generate(PROMPTS, 1, SamplingParams(max_new_tokens=4))
    assert group[0].token_ids == [7, 0, EOS_ID]


def test_logprobs_are_left_out_unless_asked_for():
    with FakeVLLMServer() as server:
        out = VLLMServerClient(server.url).generate(PROMPTS, 1, SamplingParams(max_new_tokens=4))
    assert all(g.logprobs is None for group in out for g in group)


def test_the_request_carries_the_sampling_settings_and_token_prompts():
    params = SamplingParams(max_new_tokens=9, temperature=0.7, top_p=0.9, top_k=0, stop=["\n\n"])
    with FakeVLLMServer() as server:
        VLLMServerClient(server.url).generate(PROMPTS, 3, params, seed=11)
    body = server.requests[-1]["body"]
    assert body["model"] == "tiny"
    assert body["prompt"] == PROMPTS
    assert (body["n"], body["max_tokens"], body["temperature"], body["top_p"]) == (3, 9, 0.7, 0.9)
    assert body["top_k"] == -1  # vLLM's "off"
    assert body["stop"] == ["\n\n"]
    assert body["seed"] == 11


def test_pushed_weights_end_up_in_the_servers_model(tiny_model_path):
    served = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    trained = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    with torch.no_grad():
        for p in trained.parameters():
            p.mul_(0.5)
    with FakeVLLMServer(served) as server:
        sent = VLLMServerClient(server.url).push_weights(trained.state_dict().items(), chunk_bytes=64 * 1024)
        resets = server.prefix_cache_resets
        rpc_calls = sum(r["path"] == "/collective_rpc" for r in server.requests)
    assert sent == len(trained.state_dict())
    assert rpc_calls > 1  # the small budget split the model into several requests
    assert resets == 1
    for name, tensor in trained.state_dict().items():
        assert torch.equal(served.state_dict()[name], tensor)


def test_a_server_without_dev_mode_gets_an_error_that_says_how_to_start_it(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    with FakeVLLMServer(dev_mode=False) as server, pytest.raises(VLLMServerError, match="VLLM_SERVER_DEV_MODE=1"):
        VLLMServerClient(server.url).push_weights(model.state_dict().items())


def test_an_unreachable_server_is_named_in_the_error():
    with FakeVLLMServer() as server:
        url = server.url
    with pytest.raises(VLLMServerError, match=f"cannot reach the vLLM server at {url}"):
        VLLMServerClient(url, timeout=2).generate(PROMPTS, 1, SamplingParams())
