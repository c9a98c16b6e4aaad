"""Bounds on what comes back from an environment, a tool or a model's tool call, applied where it
enters an episode: nothing an environment returns is trusted until it is checked for type and size.

- Text is made text: only `str` is text (a `str` subclass is read as the plain string it holds;
  its own `__str__` and `__len__` are never called), lone surrogates become U+FFFD, and it is cut
  to its limit with a note saying how much was dropped.
- Numbers are finite and bounded: a reward is an int or float within ±`MAX_REWARD` (anything else
  scores 0 and the turn's reason says why); an integer has at most `MAX_INT_DIGITS` digits.
- JSON-like values (tool-call arguments, the fields `reset` adds) nest at most `MAX_JSON_DEPTH`
  deep and hold at most `MAX_JSON_ITEMS` values.
- Messages are a bounded list of {"role", "content"[, "name"]} dicts.

A value of the wrong type raises `TypeError` (a bound exceeded where cutting would change its
meaning raises `ValueError`), naming what was wrong: the rollout code ends that one episode with
the message as its error, and the other episodes go on. Plain Python, no torch.
"""

from __future__ import annotations

import math
from typing import Any

from trainers.episodes import Message, ToolCall
from trainers.rollout.environments.base import EnvironmentStart, EpisodeLimits, StepResult

ROLES = ("system", "user", "assistant", "tool")
MAX_OBSERVATION_MESSAGES = 16  # messages one step may add (the tools kind: one per call, 8 calls run)
# Characters one step's observation may hold in all, in max_observation_chars: as much as the tools
# kind's 8 calls of a turn each at the limit (tool-call results count against the same budget).
STEP_OBSERVATION_LIMITS = 8
SHORT_NOTE = "[truncated]"  # the note where the limit has no room for the whole one
MAX_START_MESSAGES = 256  # messages `reset` may return
MAX_START_CHARS = 1_000_000  # characters of all of them together (tokens are cut to the prompt limit after)
MAX_REASON_CHARS = 500
MAX_STATE_CHARS = 256
MAX_NAME_CHARS = 200
MAX_ERROR_CHARS = 2000
MAX_REWARD = 1e6
MAX_INT_DIGITS = 100
MAX_JSON_DEPTH = 32
MAX_JSON_ITEMS = 10_000
MAX_FIELD_CHARS = 100_000  # one string among the fields `reset` adds (an answer the rubric compares)
_MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10))


def clean(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD (a pair split over two code points is joined)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def plain(value: Any, what: str) -> str:
    """The exact `str` a text value holds (None: ""); `TypeError` for anything else."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{what} is a {type(value).__name__}, not text")
    return value if type(value) is str else str.__getitem__(value, slice(0, str.__len__(value)))


def text(value: Any, limit: int, what: str = "text", more: int = 0) -> tuple[str, bool]:
    """(`value` as clean text of at most `limit` characters, whether it was cut). A cut text ends in a note
    saying how many characters were left out, and the note counts in the limit: the text is cut shorter to
    make room for it. `more`: characters already cut before it came (a tool that clipped its own output in
    the sandbox)."""
    value = plain(value, what)
    total = len(value) + max(more, 0)
    if total <= limit and not more:
        return clean(value), False
    return _cut(value, total, limit), True


def _note(left_out: int) -> str:
    return f"\n[truncated: {left_out} more characters]"


def _cut(value: str, total: int, limit: int) -> str:
    """The start of `value` (of `total` characters in all) and the note, within `limit` characters."""
    # Cutting more for the note never lengthens it past the one for `total` (no more digits).
    keep = min(len(value), limit - len(_note(total)))
    if keep < 0:  # a limit smaller than the note: the shortest word for it
        return SHORT_NOTE[: max(limit, 0)]
    return clean(value[:keep]) + _note(total - keep)


def short(value: Any, limit: int, what: str = "text") -> str:
    """`text` without the flag."""
    return text(value, limit, what)[0]


def messages(value: Any, limit: int, max_messages: int, what: str, total: int | None = None) -> list[Message]:
    """A list of {"role", "content"[, "name"]} messages: at most `max_messages` of them, each content cut
    to `limit` characters, and at most `total` characters in all (a message past the budget is cut, later
    ones are dropped). The last kept one says how many were dropped, within its own limit."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"{what} is a {type(value).__name__}, not a list of messages")
    read: list[tuple[Message, str]] = []
    for i, message in enumerate(value[:max_messages]):
        if not isinstance(message, dict):
            raise TypeError(f"{what}[{i}] is a {type(message).__name__}, not a message dict")
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise ValueError(f"{what}[{i}] has role {short(repr(role), 40)}; expected one of {', '.join(ROLES)}")
        bounded: Message = {"role": role, "content": ""}
        if message.get("name") is not None:
            bounded["name"] = short(message["name"], MAX_NAME_CHARS, f"{what}[{i}] name")
        read.append((bounded, plain(message.get("content"), f"{what}[{i}] content")))
    out: list[Message] = []
    rooms: list[int] = []
    left = limit * len(read) if total is None else total
    for bounded, content in read:
        if left <= 0:
            break
        rooms.append(min(limit, left))
        bounded["content"] = short(content, rooms[-1])
        left -= len(bounded["content"])
        out.append(bounded)
    dropped = len(value) - len(out)
    while dropped > 0 and out:
        note = f"\n[{dropped} more message{'s' * (dropped != 1)} dropped]"
        room, content = rooms[-1], read[len(out) - 1][1]
        if room < len(note) and len(out) > 1:  # the budget's last scraps: that message goes, the one before says so
            out.pop()
            rooms.pop()
            dropped += 1
            continue
        out[-1]["content"] = short(content, room - len(note)) + note if room >= len(note) else note[1:][:room]
        break
    return out


def start_messages(value: Any, limit: int = MAX_START_CHARS) -> list[Message]:
    """The messages `reset` returned: at most `MAX_START_MESSAGES`, `limit` characters in all
    (a message past the budget is cut, later ones are dropped)."""
    return messages(value, limit, MAX_START_MESSAGES, "reset's messages", total=limit)


def reward(value: Any) -> tuple[float, str]:
    """(the reward as a float, "" or why it was refused: then 0.0). `TypeError` for a non-number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"the reward is a {type(value).__name__}, not a number")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        return 0.0, f"reward refused (an integer of more than {MAX_INT_DIGITS} digits): 0 used"
    number = float(value)
    if not math.isfinite(number) or abs(number) > MAX_REWARD:
        return 0.0, f"reward {number:g} refused (not finite or beyond ±{MAX_REWARD:g}): 0 used"
    return number, ""


def flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool | int):
        raise TypeError(f"{what} is a {type(value).__name__}, not True or False")
    return bool(int(value))


def json_value(value: Any, what: str, *, max_chars: int | None = None) -> Any:
    """A copy of a JSON-like value (None, bool, int, float, str, list, dict with str keys): strings
    cleaned (and refused beyond `max_chars`), integers of at most `MAX_INT_DIGITS` digits, floats
    finite, nesting at most `MAX_JSON_DEPTH` deep, at most `MAX_JSON_ITEMS` values in all.
    `TypeError` / `ValueError` naming the first thing refused."""
    budget = [MAX_JSON_ITEMS]

    def walk(v: Any, depth: int, where: str) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError(f"{what} holds more than {MAX_JSON_ITEMS} values")
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            if v.bit_length() > _MAX_INT_BITS:
                raise ValueError(f"{where} is an integer of more than {MAX_INT_DIGITS} digits")
            return int(v)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise ValueError(f"{where} is not a finite number")
            return float(v)
        if isinstance(v, str):
            s = plain(v, where)
            if max_chars is not None and len(s) > max_chars:
                raise ValueError(f"{where} is text of {len(s):,} characters (at most {max_chars:,})")
            return clean(s)
        if isinstance(v, list | tuple):
            return [walk(x, depth + 1, f"{where}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise TypeError(f"{where} has a key that is a {type(k).__name__}, not text")
                key = short(k, MAX_NAME_CHARS)
                out[key] = walk(x, depth + 1, f"{where}[{key[:40]!r}]")
            return out
        raise TypeError(f"{where} is a {type(v).__name__}, not a JSON value")

    return walk(value, 0, what)


def tool_call(call: Any, limit: int) -> ToolCall:
    """A `ToolCall` an environment reported, with its text bounded and its arguments checked."""
    if not isinstance(call, ToolCall):
        raise TypeError(f"a tool call is a {type(call).__name__}, not a ToolCall")
    error = None if call.error is None else short(call.error, MAX_ERROR_CHARS, "a tool call's error")
    arguments = json_value(call.arguments, "a tool call's arguments")
    if not isinstance(arguments, dict):
        raise TypeError("a tool call's arguments are not a dict")
    result, cut = text(call.result, limit, "a tool call's result")
    seconds = call.seconds if isinstance(call.seconds, int | float) and math.isfinite(call.seconds) else 0.0
    return ToolCall(
        name=short(call.name, MAX_NAME_CHARS, "a tool call's name"), arguments=arguments, result=result,
        error=error, seconds=float(seconds), truncated=flag(call.truncated, "truncated") or cut,
    )  # fmt: skip


def step_result(result: Any, limits: EpisodeLimits) -> StepResult:
    """What `step` returned, checked and bounded: at most `MAX_OBSERVATION_MESSAGES` observation messages
    and tool calls, each text cut to `max_observation_chars` and all of them together to
    `STEP_OBSERVATION_LIMITS` times that (notes say what was cut or dropped, inside those limits); the
    reward a bounded finite float (a refused one scores 0, the reason says why), the rest typed and cut."""
    if not isinstance(result, StepResult):
        raise TypeError(f"step() returned a {type(result).__name__}, not a StepResult")
    value, refused = reward(result.reward)
    reason = short(result.reason, MAX_REASON_CHARS, "the step's reason")
    calls = result.tool_calls
    if not isinstance(calls, list | tuple):
        raise TypeError(f"the step's tool calls are a {type(calls).__name__}, not a list")
    limit = limits.max_observation_chars
    budget = limit * STEP_OBSERVATION_LIMITS
    bounded_calls, left = [], budget
    for call in calls[:MAX_OBSERVATION_MESSAGES]:
        bounded_calls.append(tool_call(call, max(min(limit, left), 0)))
        left -= len(bounded_calls[-1].result)
    if len(calls) > MAX_OBSERVATION_MESSAGES:
        unrun = len(calls) - MAX_OBSERVATION_MESSAGES
        more = f"{unrun} more tool call{'s' * (unrun != 1)} not kept (at most {MAX_OBSERVATION_MESSAGES} a step)"
        reason = short(f"{reason}; {more}" if reason else more, MAX_REASON_CHARS)
    return StepResult(
        observation=messages(result.observation, limit, MAX_OBSERVATION_MESSAGES, "the observation", total=budget),
        reward=value,
        reason=f"{reason}; {refused}" if reason and refused else reason or refused,
        done=flag(result.done, "done"),
        tool_calls=bounded_calls,
        state=short(result.state, MAX_STATE_CHARS, "the state"),
        answered=flag(result.answered, "answered"),
    )


def start(value: Any) -> EnvironmentStart:
    """What `reset` returned, checked and bounded: its messages (`start_messages`), its fields
    JSON-like and bounded, its state cut."""
    if not isinstance(value, EnvironmentStart):
        raise TypeError(f"reset() returned a {type(value).__name__}, not an EnvironmentStart")
    fields = json_value(value.fields, "reset's fields", max_chars=MAX_FIELD_CHARS)
    if not isinstance(fields, dict):
        raise TypeError("reset's fields are not a dict")
    return EnvironmentStart(
        messages=start_messages(value.messages), fields=fields, state=short(value.state, MAX_STATE_CHARS, "the state")
    )
