"""A stand-in for a vLLM OpenAI-compatible server, for tests on machines where vLLM cannot
run (no GPU). It speaks the subset of the protocol the client uses (`/v1/models`,
`/v1/completions` with token-id prompts, dev-mode `/collective_rpc` and `/reset_prefix_cache`)
and loads pushed weights into a real torch model through the real `WeightLoaderExtension`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trainers.engines.vllm_weights import LOAD_WEIGHTS_RPC, WeightLoaderExtension

EOS_ID = 2


class _ModelAdapter:
    """vLLM's `model.load_weights(iterable)` on top of an HF model's `load_state_dict`."""

    def __init__(self, model):
        self.hf_model = model

    def load_weights(self, weights):
        missing = set(dict(weights)) - set(self.hf_model.state_dict())
        if missing:
            raise KeyError(f"unknown weights {sorted(missing)}")
        self.hf_model.load_state_dict(dict(weights), strict=False)


class FakeVLLMServer:
    def __init__(self, model=None, *, dev_mode: bool = True, token_ids_field: bool = False) -> None:
        self.requests: list[dict] = []
        self.prefix_cache_resets = 0
        self.dev_mode = dev_mode
        self.token_ids_field = token_ids_field
        worker = type("Worker", (WeightLoaderExtension,), {"device": "cpu"})()
        worker.model_runner = type("Runner", (), {})()
        worker.model_runner.model = _ModelAdapter(model) if model is not None else None
        self.worker = worker
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeVLLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def completions(self, body: dict) -> dict:
        """Sample j of prompt i is [last prompt token, j, EOS] ("stop") or, for odd j, the
        same without EOS padded to max_tokens ("length"); logprob of token k is -(k+1)/10."""
        choices = []
        for i, prompt in enumerate(body["prompt"]):
            for j in range(body["n"]):
                if j % 2 == 0:
                    ids, reason = [prompt[-1], j, EOS_ID], "stop"
                else:
                    ids, reason = ([prompt[-1], j] * body["max_tokens"])[: body["max_tokens"]], "length"
                choice = {
                    "index": i * body["n"] + j,
                    "text": f"p{i}s{j}",
                    "finish_reason": reason,
                    "logprobs": {
                        "tokens": [f"token_id:{t}" for t in ids],
                        "token_logprobs": [-(k + 1) / 10 for k in range(len(ids))],
                    },
                }
                if self.token_ids_field:
                    choice["token_ids"] = ids
                choices.append(choice)
        choices.reverse()  # the client must order by index, not by position
        return {"choices": choices}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _reply(self, status: int, payload) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    self._reply(200, {"data": [{"id": "tiny"}]})
                else:
                    self._reply(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                server.requests.append({"path": self.path, "body": body})
                if self.path == "/v1/completions":
                    self._reply(200, server.completions(body))
                elif self.path == "/collective_rpc" and server.dev_mode:
                    if body["method"] != LOAD_WEIGHTS_RPC:
                        self._reply(400, {"detail": f"no method {body['method']}"})
                        return
                    loaded = server.worker.rollout_studio_load_weights(*body["args"])
                    self._reply(200, {"results": [loaded]})
                elif self.path == "/reset_prefix_cache" and server.dev_mode:
                    server.prefix_cache_resets += 1
                    self._reply(200, {})
                else:
                    self._reply(404, {"detail": "Not Found"})

        return Handler
