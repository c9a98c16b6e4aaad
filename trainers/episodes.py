"""Episodes: the prompt, then turns. Single-turn is the one-turn case.

Each turn holds the tokens the model sampled (trained on, kept exactly as sampled: never
re-tokenised from text) and the observation that followed (tool results, a simulated user's
reply: tokens rendered through the chat template, never trained on), with the environment's
turn reward and, after training, the turn's advantage.

The training batch lays an episode out as one completion after its prompt:

    [turn 0 sampled | obs 0 | turn 1 sampled | obs 1 | ... | turn K-1 sampled (| obs K-1)]

with `trained_mask` 1 on sampled tokens only and `turn_index` naming each sampled token's turn.
Plain Python, no torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Message = dict[str, Any]  # {"role": "user" | "assistant" | "tool" | "system", "content": str, ...}


@dataclass
class ToolCall:
    """One tool call parsed from a model turn, and what came of it. `error` is set when the call
    was malformed, the tool is unknown, or it raised, timed out, or was killed; `result` then
    holds what the model is shown (the error, truncated)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    error: str | None = None
    seconds: float = 0.0
    truncated: bool = False


# done: the environment said so; turn_limit / token_budget: a limit of EnvironmentSpec;
# length: single-turn completion cut at max_new_tokens; error: the environment itself failed.
EndReason = Literal["done", "turn_limit", "token_budget", "length", "error"]


@dataclass
class Turn:
    token_ids: list[int]  # sampled, as sampled (EOS included when emitted)
    text: str
    logprobs: list[float] | None = None  # the engine's, per sampled token, when it reported them
    finish_reason: str = "stop"  # the engine's: "stop" | "length"
    observation: list[Message] = field(default_factory=list)
    observation_ids: list[int] = field(default_factory=list)  # never trained on
    reward: float = 0.0
    reason: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    state: str = ""  # the environment's state *before* this turn (GiGPO groups on it)
    answered: bool = False
    advantage: float = 0.0  # mean advantage over this turn's tokens, set when trained on
    # The policy version (optimiser updates applied to the sampler's weights) that sampled each token; a
    # partial rollout's tokens can come from several (trainers.run.pipeline). None: not recorded.
    versions: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The turn as a run reports it (`Rollout.turns`): text and counts, not token ids."""
        return {
            "text": self.text,
            "num_tokens": len(self.token_ids),
            "finish_reason": self.finish_reason,
            "tool_calls": [asdict(call) for call in self.tool_calls],
            "observation": self.observation,
            "observation_tokens": len(self.observation_ids),
            "reward": self.reward,
            "reason": self.reason,
            "advantage": self.advantage,
            "answered": self.answered,
        }


@dataclass
class Episode:
    prompt_ids: list[int]
    messages: list[Message]  # the first messages (what reset returned, or the row's prompt)
    fields: dict[str, Any] = field(default_factory=dict)  # the row's fields + the environment's
    turns: list[Turn] = field(default_factory=list)
    end_reason: EndReason = "done"
    error: str | None = None  # the environment failed (its step raised): the text, for the inspector
    # With a teacher (trainers.update.teachers): [[token text, per-token signal or None], ...] over the
    # completion tokens, for the inspector; None: no teacher scored it.
    teacher_tokens: list[list[Any]] | None = None

    @property
    def completion_ids(self) -> list[int]:
        """Every token after the prompt: sampled and observation tokens, in order."""
        return [t for turn in self.turns for t in (*turn.token_ids, *turn.observation_ids)]

    @property
    def trained_mask(self) -> list[int]:
        """1 on sampled tokens, 0 on observation tokens; as long as `completion_ids`."""
        return [m for turn in self.turns for m in ([1] * len(turn.token_ids) + [0] * len(turn.observation_ids))]

    @property
    def turn_index(self) -> list[int]:
        """The turn of each sampled token, -1 on observation tokens; as long as `completion_ids`."""
        return [
            i
            for k, turn in enumerate(self.turns)
            for i in ([k] * len(turn.token_ids) + [-1] * len(turn.observation_ids))
        ]

    @property
    def engine_logprobs(self) -> list[float] | None:
        """The engine's logprob of each completion token (0.0 on observation tokens), or None."""
        if any(turn.logprobs is None for turn in self.turns):
            return None
        return [lp for turn in self.turns for lp in (*turn.logprobs, *[0.0] * len(turn.observation_ids))]

    @property
    def token_versions(self) -> list[int] | None:
        """The policy version that sampled each completion token (-1 on observation tokens), or None."""
        if any(turn.versions is None for turn in self.turns):
            return None
        return [v for turn in self.turns for v in (*turn.versions, *[-1] * len(turn.observation_ids))]

    def stamp_version(self, version: int) -> None:
        """Record `version` as the sampler of every turn whose tokens carry no version yet."""
        for turn in self.turns:
            if turn.versions is None:
                turn.versions = [version] * len(turn.token_ids)

    @property
    def oldest_version(self) -> int | None:
        """The oldest policy version among the sampled tokens (None: none recorded, or nothing sampled)."""
        versions = [v for turn in self.turns for v in turn.versions or ()]
        return min(versions) if versions else None

    def version_spans(self) -> list[list[int]] | None:
        """The sampled tokens' versions as runs, [[version, tokens], ...] in order: [[3, 16], [4, 5]] is 16
        tokens from version 3, then 5 from version 4 (a partial rollout continued after an update)."""
        if any(turn.versions is None for turn in self.turns):
            return None
        spans: list[list[int]] = []
        for v in (v for turn in self.turns for v in turn.versions or ()):
            if spans and spans[-1][0] == v:
                spans[-1][1] += 1
            else:
                spans.append([v, 1])
        return spans

    @property
    def sampled_tokens(self) -> int:
        return sum(len(turn.token_ids) for turn in self.turns)

    @property
    def observation_tokens(self) -> int:
        return sum(len(turn.observation_ids) for turn in self.turns)

    @property
    def final_text(self) -> str:
        """The last model turn's text: what the rubric scores as the completion."""
        return self.turns[-1].text if self.turns else ""

    def transcript(self) -> list[Message]:
        """The conversation after the prompt: assistant turns and the observations that followed."""
        out: list[Message] = []
        for turn in self.turns:
            out.append({"role": "assistant", "content": turn.text})
            out.extend(turn.observation)
        return out
