"""A client for a separate vLLM server (`rollout.vllm_server_url`): generation through the
OpenAI-compatible `/v1/completions` endpoint with token-id prompts, weight sync through
vLLM's development endpoints (`/collective_rpc`, `/reset_prefix_cache`).

Start the server (on another GPU or machine) with

    VLLM_SERVER_DEV_MODE=1 PYTHONPATH=/path/to/this/repo vllm serve <model> \\
        --worker-extension-cls trainers.engines.vllm_weights.WeightLoaderExtension \\
        --logprobs-mode processed_logprobs

(logprobs after temperature, as the trainer's; the raw ones would skew the gap metric and TIS.)

`VLLM_SERVER_DEV_MODE` exposes endpoints that run code on the server: keep the port on
a private network. Without the extension the server still generates, but the trainer
cannot update its weights (`push_weights` raises and says so).

Standard library only (urllib), so it imports anywhere.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

import torch

from trainers.engines.base import Generation, SamplingParams
from trainers.engines.vllm_weights import DEFAULT_CHUNK_BYTES, LOAD_WEIGHTS_RPC, chunked, encode_weights

_TOKEN_ID_PREFIX = "token_id:"  # how vLLM spells tokens with return_tokens_as_token_ids


class VLLMServerError(RuntimeError):
    """The server answered with an error or could not be reached; the message names the URL."""


class VLLMServerClient:
    def __init__(self, base_url: str, *, timeout: float = 600.0, model: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._model = model

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        url = f"{self.base_url}{path}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise VLLMServerError(f"{method} {url} failed with HTTP {exc.code}: {detail}") from exc
        except urllib.error.URLError as exc:
            raise VLLMServerError(f"cannot reach the vLLM server at {url}: {exc.reason}") from exc
        return json.loads(raw) if raw.strip() else None

    def model_name(self) -> str:
        """The served model's name (the first in /v1/models), asked once."""
        if self._model is None:
            models = self._request("GET", "/v1/models")["data"]
            if not models:
                raise VLLMServerError(f"{self.base_url}/v1/models lists no model")
            self._model = models[0]["id"]
        return self._model

    def generate(
        self, prompt_token_ids: list[list[int]], n: int, params: SamplingParams, seed: int | None = None
    ) -> list[list[Generation]]:
        """n completions per prompt; result[i][j] is sample j of prompt i."""
        body = {
            "model": self.model_name(),
            "prompt": prompt_token_ids,
            "n": n,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else -1,
            "stop": params.stop or None,
            # Always ask for the sampled token's logprob: with return_tokens_as_token_ids it is
            # also how older servers spell the completion's token ids.
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "skip_special_tokens": True,
            "seed": seed,
        }
        choices = sorted(self._request("POST", "/v1/completions", body)["choices"], key=lambda c: c["index"])
        if len(choices) != len(prompt_token_ids) * n:
            raise VLLMServerError(
                f"{self.base_url}/v1/completions returned {len(choices)} choices for "
                f"{len(prompt_token_ids)} prompts x n={n}"
            )
        generations = [choice_to_generation(c, keep_logprobs=params.logprobs) for c in choices]
        return [generations[i * n : (i + 1) * n] for i in range(len(prompt_token_ids))]

    def push_weights(self, weights: Iterable[tuple[str, torch.Tensor]], chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
        """Send the weights in safetensors chunks; the server's workers load them in place.
        Returns the number of tensors sent."""
        sent = 0
        for chunk in chunked(weights, chunk_bytes):
            try:
                self._request("POST", "/collective_rpc", {"method": LOAD_WEIGHTS_RPC, "args": [encode_weights(chunk)]})
            except VLLMServerError as exc:
                raise VLLMServerError(
                    f"{exc}. Start the server with VLLM_SERVER_DEV_MODE=1 and "
                    "--worker-extension-cls trainers.engines.vllm_weights.WeightLoaderExtension"
                ) from exc
            sent += len(chunk)
        self._request("POST", "/reset_prefix_cache")  # cached KV was computed with the old weights
        return sent


def choice_to_generation(choice: dict[str, Any], *, keep_logprobs: bool) -> Generation:
    """One `/v1/completions` choice as a Generation (token ids include EOS when it was sampled)."""
    logprobs = choice.get("logprobs") or {}
    token_ids = choice.get("token_ids")
    if token_ids is None:
        tokens = logprobs.get("tokens")
        if tokens is None:
            raise VLLMServerError("the server returned neither token_ids nor logprobs.tokens; is it vLLM?")
        token_ids = [int(t.removeprefix(_TOKEN_ID_PREFIX)) for t in tokens]
    values = logprobs.get("token_logprobs") if keep_logprobs else None
    return Generation(
        token_ids=list(token_ids),
        text=choice.get("text") or "",
        logprobs=[float(v) for v in values] if values is not None else None,
        finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
    )
