"""What the sandboxed process of a verifiers environment runs (with the package's own python).

Loaded as the sandbox worker's source (trainers.sandbox._child, `worker` mode) after the sandbox's
limits and its socket block are in place; `CONFIG` is put in front of it by the host as a JSON
literal. Loading imports verifiers 0.4 (`verifiers.v1`), the package's Taskset (its module's
`__all__`), builds it from the run's config and reads its first `max_rows` tasks. Then
`handle(method, argument)` answers:

- `describe`: the reward functions with their weights, the metrics, the number of tasks;
- `rows`: each task as chat messages (its system prompt and prompt) and its answer;
- `score`: [{"task": index, "completion": text}] -> for each, the task's own `score(trace)` on a
  trace holding the prompt and the completion: {"rewards": {name: [score, weight]}, "metrics":
  {name: value}, "error": text}.

Everything it sends is plain JSON with texts cut to `max_chars`; the host checks it all again
(this module shares its process with the package's code, which may have rebound anything here).
Standard library and verifiers only: it never imports the studio's code.
"""

import importlib
import socket


def _no_new_sockets():
    """The sandbox replaced `socket.socket` by a function, which breaks `class SSLSocket(socket)` (ssl,
    asyncio and so verifiers import it). Put a class back that still refuses every new socket, and
    wraps only descriptors that already exist (the socket pair asyncio's loop wakes itself with).
    The real barrier stays the sandbox's empty network namespace."""
    importlib.reload(socket)
    base = socket.socket

    class NoNewSocket(base):
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None:
                raise PermissionError("network access is disabled in the sandbox")
            super().__init__(family, type, proto, fileno)

    def refuse(*args, **kwargs):
        raise PermissionError("network access is disabled in the sandbox")

    socket.socket = socket.SocketType = NoNewSocket
    socket.create_connection = socket.getaddrinfo = refuse


_no_new_sockets()

import asyncio  # noqa: E402  (after the socket class is back)
import json  # noqa: E402
import math  # noqa: E402

import verifiers.v1 as vf  # noqa: E402
from verifiers.v1.configs.taskset import TasksetConfig  # noqa: E402
from verifiers.v1.envs.single_agent import SingleAgentEnv  # noqa: E402
from verifiers.v1.graph import MessageNode  # noqa: E402
from verifiers.v1.trace import AgentInfo, Trace, TraceTask  # noqa: E402
from verifiers.v1.types import AssistantMessage, SystemMessage, UserMessage, content_text  # noqa: E402
from verifiers.v1.utils.generic import concrete_type  # noqa: E402
from verifiers.v1.utils.loaders import environment_class, taskset_class  # noqa: E402

CONFIG = json.loads(CONFIG_JSON)  # noqa: F821  (prepended by the host)
MAX_CHARS = CONFIG["max_chars"]
MAX_NAMES = 64


def run(coroutine):
    return asyncio.run(coroutine)


def cut(text):
    text = text if isinstance(text, str) else str(text)
    return (
        text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + f"\n[truncated: {len(text) - MAX_CHARS} more characters]"
    )


def _load():
    module = CONFIG["module"]
    env_class = environment_class(module)
    if env_class is not SingleAgentEnv:
        raise RuntimeError(
            f"the package exports its own Env ({env_class.__name__}), whose agents call models themselves; "
            "the studio drives only tasksets scored on the model's reply (a single-agent environment)"
        )
    taskset_type = taskset_class(module)
    config_type = concrete_type(taskset_type, TasksetConfig) or TasksetConfig
    taskset = taskset_type(config_type(id=module, **CONFIG["config"]))
    if taskset_type.toolsets(taskset.config):
        raise RuntimeError("the taskset offers tool servers (MCP toolsets), which the studio does not run")
    tasks = list(taskset.take(CONFIG["max_rows"]))
    if not tasks:
        raise RuntimeError("the taskset yielded no task")
    first = tasks[0]
    if type(first).NEEDS_CONTAINER or type(first).toolsets(first.config):
        raise RuntimeError("its tasks need a container or tool servers, which the studio does not run")
    if first.config.judges:
        raise RuntimeError("its tasks are scored by judges (models behind an endpoint); not run in the sandbox")
    return tasks


TASKS = _load()


def messages_of(task):
    data = task.data
    out = [{"role": "system", "content": cut(data.system_prompt)}] if data.system_prompt else []
    if isinstance(data.prompt, str):
        out.append({"role": "user", "content": cut(data.prompt)})
    else:
        for message in data.prompt or []:
            out.append({"role": str(message.role), "content": cut(content_text(message.content))})
    return out


def describe():
    task = TASKS[0]
    rewards = [[fn.__name__, float(getattr(fn, "_vf_weight", 1.0))] for fn in task.hooks("reward")]
    metrics = [fn.__name__ for fn in task.hooks("metric")]
    return {"rewards": rewards[:MAX_NAMES], "metrics": metrics[:MAX_NAMES], "tasks": len(TASKS)}


def rows():
    out = []
    for task in TASKS:
        answer = getattr(task.data, "answer", "")
        out.append({"messages": messages_of(task), "answer": cut(answer if isinstance(answer, str) else json.dumps(answer, default=str)),
                    "id": cut(task.data.id or ""), "name": cut(task.data.name or "")})  # fmt: skip
    return out


def trace_of(task, completion):
    trace = Trace(task=TraceTask(type=type(task).__name__, data=task.data), agent=AgentInfo(config=vf.AgentConfig()))
    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    parent = None
    for message in messages_of(task):
        trace.nodes.append(MessageNode(parent=parent, message=kinds[message["role"]](content=message["content"])))
        parent = len(trace.nodes) - 1
    trace.nodes.append(MessageNode(parent=parent, message=AssistantMessage(content=completion), sampled=True))
    return trace


def number(value):
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def score_one(item):
    task = TASKS[item["task"]]
    trace = trace_of(task, item["completion"])
    try:
        run(task.score(trace))
    except Exception as exc:  # the task's own error (a reward that raised): this sample's, said in words
        return {"rewards": {}, "metrics": {}, "error": cut(f"{type(exc).__name__}: {exc}")}
    rewards = {cut(k): [number(r.score), number(r.weight)] for k, r in list(trace.rewards.items())[:MAX_NAMES] if r}
    metrics = {cut(k): number(v) for k, v in list(trace.metrics.items())[:MAX_NAMES] if v is not None}
    return {"rewards": rewards, "metrics": metrics, "error": ""}


def handle(method, argument):
    if method == "describe":
        return describe()
    if method == "rows":
        return rows()
    if method == "score":
        return [score_one(item) for item in argument]
    raise ValueError(f"unknown method {method!r}")
