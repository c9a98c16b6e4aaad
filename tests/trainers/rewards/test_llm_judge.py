"""The LLM judge against a real local HTTP server that speaks the OpenAI chat-completions protocol.

The server is a test double: no judge model or hosted endpoint can be reached from here, so the
server answers with canned replies chosen by the completion being graded. Everything between the
criterion and the socket (request body, headers, timeouts, parsing) is the real code path.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from tests.trainers.rewards.helpers import sample
from trainers.rewards.catalog import LLMJudgeParams
from trainers.rewards.criteria import build_criterion
from trainers.rewards.criteria.llm_judge import parse_score

RUBRIC = "Award points for a correct, polite answer."
REPLIES = {
    "good answer": "Correct and polite.\nScore: 8",
    "bad answer": "Wrong.\n**Score:** 2",
    "no score": "I think this answer is fine overall.",
    "too high": "Excellent. Score: 15",
}


class FakeJudge(BaseHTTPRequestHandler):
    requests: list = []  # (path, headers, body) of every request, for assertions

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeJudge.requests.append((self.path, dict(self.headers), body))
        graded = body["messages"][-1]["content"].rsplit("# Response to grade\n", 1)[-1]
        if graded == "slow answer":
            time.sleep(3)
        if graded == "server error":
            self._send(500, {"error": {"message": "model overloaded"}})
            return
        reply = REPLIES.get(graded, "Score: 5")
        self._send(
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}],
            },
        )

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def judge_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeJudge)
    server.daemon_threads = True
    FakeJudge.requests = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def judge(url, **params):
    return build_criterion(
        "llm_judge",
        {
            "base_url": url,
            "model": "judge-1",
            "rubric": RUBRIC,
            "timeout_s": 1.0,
            "api_key_env": "TEST_JUDGE_API_KEY",
            **params,
        },
    )


def test_it_normalises_the_judges_score_and_keeps_its_reasoning(judge_url, monkeypatch):
    monkeypatch.setenv("TEST_JUDGE_API_KEY", "secret-123")
    monkeypatch.setenv("TEST_JUDGE_BASE_URL", judge_url)  # the server the key is for
    good, bad = judge(judge_url).score_batch([sample("good answer", answer="42"), sample("bad answer")])
    assert good.score == pytest.approx(0.8)
    assert good.explanation == "judge: 8/10. Correct and polite.\nScore: 8"
    assert bad.score == pytest.approx(0.2)
    path, headers, body = FakeJudge.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer secret-123"
    assert body["model"] == "judge-1"
    assert RUBRIC in body["messages"][-1]["content"]


def test_the_prompt_carries_the_reference_answer_only_when_the_row_has_one(judge_url):
    judge(judge_url).score_batch([sample("good answer", answer="42"), sample("bad answer")])
    contents = sorted((b["messages"][-1]["content"] for _, _, b in FakeJudge.requests), key=len)
    assert "# Reference answer\n42" in contents[1]
    assert "# Reference answer" not in contents[0]


def test_a_custom_score_range_is_mapped_to_zero_one(judge_url):
    [result] = judge(judge_url, score_min=1, score_max=9).score_batch([sample("anything")])  # "Score: 5"
    assert result.score == pytest.approx(0.5)


def test_a_reply_without_a_score_is_an_error(judge_url):
    [result] = judge(judge_url).score_batch([sample("no score")])
    assert result.score == 0.0
    assert result.error.startswith("no 'Score: N' in the judge's reply")


def test_a_score_outside_the_range_is_clipped_and_says_so(judge_url):
    [result] = judge(judge_url).score_batch([sample("too high")])
    assert result.score == 1.0
    assert "outside [0, 10], clipped" in result.explanation


def test_a_slow_judge_times_out_without_holding_up_the_rest(judge_url):
    started = time.monotonic()
    slow, good = judge(judge_url).score_batch([sample("slow answer"), sample("good answer")])
    assert slow.score == 0.0
    assert "did not answer within 1 s" in slow.error
    assert good.score == pytest.approx(0.8)
    assert time.monotonic() - started < 2.5


def test_an_http_error_is_reported_with_the_servers_answer(judge_url):
    [result] = judge(judge_url).score_batch([sample("server error")])
    assert result.score == 0.0
    assert "HTTP 500" in result.error
    assert "model overloaded" in result.error


def test_an_unreachable_endpoint_is_an_error():
    [result] = judge("http://127.0.0.1:9/v1").score_batch([sample("good answer")])
    assert result.score == 0.0
    assert "cannot reach judge endpoint" in result.error


def test_it_refuses_an_empty_score_range():
    with pytest.raises(ValidationError, match="score_max"):
        LLMJudgeParams(model="m", rubric="r", score_min=5, score_max=5)


def test_parse_score_takes_the_last_score_line():
    params = LLMJudgeParams(model="m", rubric="r")
    assert parse_score("Score: 2 at first... final Score = 6.5", params).score == pytest.approx(0.65)


def test_a_local_model_judge_loads_once_and_gives_an_error_when_it_writes_no_score(tiny_model_path):
    # The tiny local model is random, so it never writes "Score: N": the path is real, the verdict an error.
    from trainers.rewards.criteria.judging import _LOCAL_MODELS

    criterion = build_criterion(
        "llm_judge", {"backend": "local", "model": str(tiny_model_path), "rubric": RUBRIC, "max_tokens": 8}
    )
    results = criterion.score_batch([sample("good answer"), sample("bad answer")])
    assert [r.score for r in results] == [0.0, 0.0]
    assert all(r.error.startswith("no 'Score: N' in the judge's reply") for r in results)
    loaded = _LOCAL_MODELS[str(tiny_model_path)]
    criterion.score_batch([sample("again")])
    assert _LOCAL_MODELS[str(tiny_model_path)] is loaded


@pytest.mark.parametrize("name", ["DATABASE_URL", "SECRET_KEY", "REDIS_URL", "AWS_SECRET_ACCESS_KEY", "openai_api_key"])
def test_the_key_variable_must_be_an_api_key_so_a_rubric_cannot_exfiltrate_other_settings(name):
    with pytest.raises(ValueError, match="api_key_env"):
        build_criterion("llm_judge", {"model": "judge-1", "rubric": RUBRIC, "api_key_env": name})


def test_a_reply_of_long_gaps_is_read_in_linear_time():
    # "score" then 20,000 spaces and no colon took 2 s with a pattern of two \s* around \**.
    params = LLMJudgeParams(model="m", rubric="r")
    started = time.perf_counter()
    result = parse_score(("score" + " " * 20_000 + "x ") * 5 + "Score: 7", params)
    assert time.perf_counter() - started < 0.5
    assert result.error is None and result.score == pytest.approx(
        (7 - params.score_min) / (params.score_max - params.score_min)
    )


# --- the API key goes only to the server it is set for ---------------------------------------------


class Elsewhere(BaseHTTPRequestHandler):
    """Another judge server, say one a rubric's editor runs: it records every request's headers."""

    headers_seen: list = []

    def do_POST(self):
        Elsewhere.headers_seen.append(dict(self.headers))
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Score: 9"}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def elsewhere_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    server.daemon_threads = True
    Elsewhere.headers_seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_the_api_key_reaches_only_the_server_it_is_set_for(judge_url, elsewhere_url, monkeypatch):
    monkeypatch.setenv("TEST_JUDGE_API_KEY", "secret-123")
    monkeypatch.setenv("TEST_JUDGE_BASE_URL", judge_url)
    [moved] = judge(elsewhere_url).score_batch([sample("good answer")])
    assert moved.score == 0.0
    assert "TEST_JUDGE_API_KEY is set for" in moved.error and "not sent" in moved.error
    assert "TEST_JUDGE_BASE_URL" in moved.error
    assert Elsewhere.headers_seen == []  # nothing went there: not the key, not the completion
    # Another path under the same host and port is another server too (/v10 is not under /v1).
    [beside] = judge(judge_url + "0").score_batch([sample("good answer")])
    assert "not sent" in beside.error and FakeJudge.requests == []
    [own] = judge(judge_url).score_batch([sample("good answer")])  # its own server: sent, and scored
    assert own.score == pytest.approx(0.8)
    assert [h["Authorization"] for _, h, _ in FakeJudge.requests] == ["Bearer secret-123"]


def test_a_key_set_for_no_server_is_sent_nowhere_and_openais_goes_to_openai(elsewhere_url, monkeypatch):
    monkeypatch.setenv("TEST_JUDGE_API_KEY", "secret-123")
    monkeypatch.delenv("TEST_JUDGE_BASE_URL", raising=False)
    [result] = judge(elsewhere_url).score_batch([sample("good answer")])
    assert "has no server (TEST_JUDGE_BASE_URL)" in result.error
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    [openai] = judge(elsewhere_url, api_key_env="OPENAI_API_KEY").score_batch([sample("good answer")])
    assert "OPENAI_API_KEY is set for https://api.openai.com/v1, not" in openai.error
    assert Elsewhere.headers_seen == []
    monkeypatch.delenv("TEST_JUDGE_API_KEY")  # no key at all: the request goes, without an Authorization header
    [keyless] = judge(elsewhere_url).score_batch([sample("good answer")])
    assert keyless.score == pytest.approx(0.9)
    assert [("Authorization" in h) for h in Elsewhere.headers_seen] == [False]
