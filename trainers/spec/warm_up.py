"""The cold start: a short supervised fine-tune on example conversations before RL begins."""

from __future__ import annotations

from pydantic import Field, field_validator

from trainers.access import DATA, marks
from trainers.spec.base import Section


class WarmUpSpec(Section):
    """A supervised cold start before RL (ReTool's cold-start SFT): the model is first fine-tuned on
    example conversations, cross-entropy on the assistant's messages only, each conversation laid out
    as a rollout lays it out; RL then starts from that model (and a KL term, if any, keeps near it).
    For a model that does not yet write a tool call, so that RL has calls to reward. The fine-tuned
    model is written under the run's output folder (warm-up/) and reused when the run resumes."""

    path: str = Field(
        ...,
        min_length=1,
        description="Example conversations: a JSONL, JSON, CSV or Parquet file whose rows hold a list of chat "
        'messages [{"role", "content"}] (system, user, assistant, tool...), each ending with what the model '
        "should write. Empty: no cold start.",
        json_schema_extra=marks(DATA),
    )
    messages_field: str = Field(
        "messages",
        description="Field of each row holding its conversation.",
        json_schema_extra={"pattern": r"\S"},  # the schema says what `_named` refuses: blank text
    )
    steps: int = Field(8, ge=1, le=100_000, description="Optimiser steps (AdamW, constant learning rate).")
    batch_size: int = Field(8, ge=1, le=4096, description="Conversations per step, drawn at random (seeded).")
    lr: float = Field(1e-4, gt=0, le=1, description="Learning rate of the cold start (RL's is optim.lr).")

    @field_validator("messages_field")
    @classmethod
    def _named(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name the field holding each conversation, e.g. 'messages'")
        return v
