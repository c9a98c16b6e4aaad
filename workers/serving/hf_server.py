"""A small OpenAI-compatible server over a transformers model, for workers without vLLM:
POST /v1/chat/completions and /v1/completions (streamed as SSE or not), GET /v1/models; /v1/completions with
echo, logprobs 0 and max_tokens 0 scores the prompt (its tokens' logprobs, as vLLM answers: a distillation teacher).

    ROLLOUT_SERVING_KEY=... python -m workers.serving.hf_server --name run-1/step-4 \\
        --model-path <base> [--checkpoint <folder>] [--model-spec '{"dtype": ...}'] --port 8123

POST /studio/tools/start and /studio/tools/step: the playground's "use the run's tools", the run's tools
environment run here, on the worker (workers.serving.agent_tools).

Sampling: temperature (0: greedy), top_p, max_tokens, seed, stop, n. Chat requests go through the
model's chat template with tools (`workers.serving.chat`), and calls come back as OpenAI tool_calls.
One generation at a time (a lock): the process serves one model on the worker's device, and its
answers are checked by the studio before they are relayed (studio.serving.relay). Every request
needs the key the worker set in ROLLOUT_SERVING_KEY (the port is reachable by other local users).
Plain Python and the trainer: no Django here.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY_ENV = "ROLLOUT_SERVING_KEY"
MAX_BODY_BYTES = 4 * 1024 * 1024
PARENT_CHECK_S = 2.0


class Generator:
    """The model, its tokenizer and the one lock generations take turns on."""

    def __init__(self, model, tokenizer) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.lock = threading.Lock()

    def run(self, ids: list[int], body: dict[str, Any], seed: int | None,
            on_text: Callable[[str], None] | None = None) -> tuple[str, str, int]:  # fmt: skip
        """(text, finish_reason, completion tokens) of one sample; `on_text` gets its pieces as they are made."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        stops: list[str] = body.get("stop") or []
        hold = max((len(s) for s in stops), default=1) - 1  # text that may still become a stop string
        flag = threading.Event()

        class Flagged(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs) -> bool:  # noqa: ARG002
                return flag.is_set()

        with self.lock:
            if seed is not None:
                torch.manual_seed(seed)
            streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=600)
            temperature = float(body.get("temperature", 1.0))
            tensor = torch.tensor([ids], device=self.model.device)
            kwargs = {"input_ids": tensor, "attention_mask": torch.ones_like(tensor),
                      "max_new_tokens": int(body.get("max_tokens", 256)), "streamer": streamer,
                      "stopping_criteria": StoppingCriteriaList([Flagged()]),
                      "pad_token_id": self.tokenizer.pad_token_id or self.tokenizer.eos_token_id}  # fmt: skip
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=temperature, top_p=float(body.get("top_p", 1.0)), top_k=0)
            else:
                kwargs.update(do_sample=False)
            result: dict[str, Any] = {}

            def generate() -> None:
                try:
                    with torch.inference_mode():
                        result["out"] = self.model.generate(**kwargs)
                except BaseException as exc:  # noqa: BLE001 - given to the request's thread
                    result["error"] = exc
                    streamer.end()

            thread = threading.Thread(target=generate, daemon=True)
            thread.start()
            text, sent, stopped = "", 0, False
            for piece in streamer:
                text += piece
                cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
                if cut >= 0:
                    text, stopped = text[:cut], True
                    flag.set()
                    break
                if on_text is not None and len(text) - hold > sent:
                    on_text(text[sent : len(text) - hold])
                    sent = len(text) - hold
            thread.join()
        if "error" in result:
            raise result["error"]
        if on_text is not None and len(text) > sent:
            on_text(text[sent:])
        new = result["out"][0][len(ids) :].tolist()
        ended = bool(new) and new[-1] == self.tokenizer.eos_token_id
        finish = "length" if not stopped and not ended and len(new) >= kwargs["max_new_tokens"] else "stop"
        return text, finish, len(new)

    def score(self, prompts: list[list[int]]) -> list[dict[str, Any]]:
        """Completion choices for echo with logprobs 0: each prompt's tokens (as texts) and the model's logprob
        of each given the ones before it (None for the first, which nothing predicts), at temperature 1."""
        import torch

        choices = []
        with self.lock, torch.inference_mode():
            for index, ids in enumerate(prompts):
                logits = self.model(torch.tensor([ids], device=self.model.device)).logits[0].float()  # (L, V)
                logp = torch.log_softmax(logits[:-1], dim=-1).gather(-1, torch.tensor(ids[1:], device=logits.device)
                                                                   .unsqueeze(-1)).squeeze(-1)  # fmt: skip
                tokens = [self.tokenizer.decode([i]) for i in ids]
                offsets = [sum(len(t) for t in tokens[:k]) for k in range(len(tokens))]
                choices.append({"index": index, "text": "".join(tokens), "finish_reason": "length", "logprobs": {
                    "tokens": tokens, "token_logprobs": [None, *logp.tolist()], "top_logprobs": None,
                    "text_offset": offsets}})  # fmt: skip
        return choices


def _token_prompts(tokenizer, body: dict[str, Any]) -> list[list[int]]:
    """The prompts of a scoring request (echo): a text, a list of ids, or a list of either, as OpenAI's
    completions take them. Only echo with max_tokens 0 and logprobs 0 is served (what a distillation
    teacher asks: trainers.update.teachers): ValueError in words otherwise."""
    if body.get("stream") or int(body.get("max_tokens", 16)) != 0:
        raise ValueError("echo is served for scoring only: max_tokens 0, not streamed")
    if body.get("logprobs") is None or int(body["logprobs"]) != 0:
        raise ValueError("echo needs logprobs 0: the sent tokens' own logprobs (no top alternatives here)")
    prompt = body["prompt"]
    items = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], (list, str)) else [prompt]
    out = []
    for item in items:
        ids = tokenizer(item).input_ids if isinstance(item, str) else item
        if not ids or not all(isinstance(i, int) and 0 <= i < len(tokenizer) for i in ids):
            raise ValueError(f"a prompt must be text or a non-empty list of token ids below {len(tokenizer)}")
        out.append(list(ids))
    return out


def _tools_start(body: dict[str, Any]) -> dict[str, Any]:
    from workers.serving import agent_tools

    return agent_tools.start(body)


def _tools_step(body: dict[str, Any]) -> dict[str, Any]:
    from workers.serving import agent_tools

    return agent_tools.step(body)


# The playground's "use the run's tools": the environment's start and step, run here on the worker.
TOOL_PATHS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "/studio/tools/start": _tools_start, "/studio/tools/step": _tools_step}  # fmt: skip


def _chunk(kind: str, rid: str, name: str, choices: list[dict[str, Any]], usage: dict | None = None) -> dict:
    event = {"id": rid, "object": kind, "created": int(time.time()), "model": name, "choices": choices}
    if usage is not None:
        event["usage"] = usage
    return event


class Handler(BaseHTTPRequestHandler):
    server_version = "rollout-hf-server"
    generator: Generator
    name: str
    key: str

    def log_message(self, fmt: str, *args: Any) -> None:  # a line per request on stderr, the worker's log
        sys.stderr.write(f"hf_server: {fmt % args}\n")

    def _json(self, status: int, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _error(self, status: int, message: str) -> None:
        self._json(
            status, {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
        )

    def _authorised(self) -> bool:
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {self.key}".encode()):
            return True
        self._error(401, "wrong or missing key")
        return False

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._authorised():
            return
        if self.path.rstrip("/") != "/v1/models":
            return self._error(404, "not found")
        self._json(200, {"object": "list", "data": [{"id": self.name, "object": "model", "owned_by": "studio"}]})

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        kind = {"/v1/chat/completions": "chat", "/v1/completions": "completion"}.get(self.path)
        tools = TOOL_PATHS.get(self.path)
        if kind is None and tools is None:
            return self._error(404, "not found")
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY_BYTES:
            return self._error(413, f"a body of 1 to {MAX_BODY_BYTES} bytes is required")
        try:
            body = json.loads(self.rfile.read(length))
            if tools is not None:  # the run's tools environment (workers.serving.agent_tools): no generation
                return self._json(200, tools(body))
            if kind == "completion" and body.get("echo"):  # scoring: the prompt's logprobs, nothing generated
                return self._json(200, _chunk("text_completion", "cmpl-" + uuid.uuid4().hex, self.name,
                                              self.generator.score(_token_prompts(self.generator.tokenizer, body))))  # fmt: skip
            ids = self._prompt(kind, body)
        except (ValueError, KeyError, TypeError) as exc:
            return self._error(400, f"{type(exc).__name__}: {exc}")
        if body.get("stream"):
            self._stream(kind, body, ids)
        else:
            self._whole(kind, body, ids)

    def _prompt(self, kind: str, body: dict[str, Any]) -> list[int]:
        from workers.serving.chat import prompt_ids

        tokenizer = self.generator.tokenizer
        if kind == "chat":
            return prompt_ids(tokenizer, body["messages"], body.get("tools") or [])
        return tokenizer(str(body["prompt"])).input_ids

    def _samples(self, body: dict[str, Any]) -> Iterator[tuple[int, int | None]]:
        seed = body.get("seed")
        for index in range(int(body.get("n", 1))):
            yield index, None if seed is None else int(seed) + index

    def _whole(self, kind: str, body: dict[str, Any], ids: list[int]) -> None:
        from workers.serving.chat import split_tool_calls

        choices, completion_tokens = [], 0
        for index, seed in self._samples(body):
            text, finish, count = self.generator.run(ids, body, seed)
            completion_tokens += count
            if kind == "completion":
                choices.append({"index": index, "text": text, "finish_reason": finish, "logprobs": None})
                continue
            content, calls = split_tool_calls(text) if body.get("tools") else (text, [])
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"], finish = calls, "tool_calls"
            choices.append({"index": index, "message": message, "finish_reason": finish})
        usage = {"prompt_tokens": len(ids), "completion_tokens": completion_tokens,
                 "total_tokens": len(ids) + completion_tokens}  # fmt: skip
        rid = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        self._json(
            200, _chunk("chat.completion" if kind == "chat" else "text_completion", rid, self.name, choices, usage)
        )

    def _stream(self, kind: str, body: dict[str, Any], ids: list[int]) -> None:
        from workers.serving.chat import split_tool_calls

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        rid = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
        object_kind = "chat.completion.chunk" if kind == "chat" else "text_completion"

        def send(choices: list[dict[str, Any]], usage: dict | None = None) -> None:
            event = _chunk(object_kind, rid, self.name, choices, usage)
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

        tools = kind == "chat" and bool(body.get("tools"))
        completion_tokens = 0
        for index, seed in self._samples(body):
            if kind == "chat":
                send([{"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])

            def piece(text: str, index: int = index) -> None:
                delta = {"delta": {"content": text}} if kind == "chat" else {"text": text}
                send([{"index": index, **delta, "finish_reason": None}])

            # With tools the turn is read whole: a call is known only once it is closed.
            text, finish, count = self.generator.run(ids, body, seed, on_text=None if tools else piece)
            completion_tokens += count
            last: dict[str, Any] = {"delta": {}} if kind == "chat" else {"text": ""}
            if tools:
                content, calls = split_tool_calls(text)
                if calls:
                    finish = "tool_calls"
                    last["delta"] = {"content": content, "tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}
                else:
                    last["delta"] = {"content": text}
            send([{"index": index, **last, "finish_reason": finish}])
        if (body.get("stream_options") or {}).get("include_usage"):
            send([], {"prompt_tokens": len(ids), "completion_tokens": completion_tokens,
                      "total_tokens": len(ids) + completion_tokens})  # fmt: skip
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def load(model_path: str, checkpoint: str | None, model_spec: dict[str, Any]) -> Generator:
    """The model for inference: a LoRA checkpoint's adapters merged (faster to sample), dropout off."""
    from trainers.models.loading import default_device, load_policy
    from trainers.spec import ModelSpec

    spec = ModelSpec.model_validate({**model_spec, "path": model_path, "gradient_checkpointing": False})
    model, tokenizer = load_policy(spec, default_device(), checkpoint=checkpoint or None)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.eval()
    return Generator(model, tokenizer)


def _exit_with_parent(parent: int) -> None:
    """End when the worker's process that started this one is gone (killed, not stopped cleanly)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--model-spec", default="{}", help="the run's model section, as JSON")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    key = os.environ.pop(KEY_ENV, "")
    if not key:
        parser.error(f"{KEY_ENV} must hold the key requests must carry")
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    generator = load(args.model_path, args.checkpoint, json.loads(args.model_spec))
    handler = type("BoundHandler", (Handler,), {"generator": generator, "name": args.name, "key": key})
    server = ThreadingHTTPServer((args.host, args.port), handler)
    server.daemon_threads = True
    print(f"hf_server: {args.name} on {args.host}:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
