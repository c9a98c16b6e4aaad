"""How one run spreads over processes: one per GPU (or per CPU slot on a machine without GPUs), on one
node or several, and how the model's parameters, gradients and optimiser state are divided among them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trainers.spec.base import Section, field_error

SHARDING_HELP = (
    "full: parameters, gradients and optimiser state divided over every process (FSDP2; memory per process "
    "falls as 1/processes). hybrid: divided within a node, replicated across nodes (less traffic between "
    "nodes). replicate: every process holds the whole model and its optimiser state, gradients averaged (DDP)."
)


class ParallelSpec(Section):
    """Processes per node, nodes, and the sharding of the model over them (FSDP2 on a device mesh)."""

    procs_per_node: int = Field(
        1, ge=1, le=64, description="Processes per node: one per GPU (CPU processes without GPUs)."
    )
    nodes: int = Field(1, ge=1, le=1024, description="Machines the run spans (more than one: through a Ray cluster).")
    sharding: Literal["full", "hybrid", "replicate"] = Field("full", description=SHARDING_HELP)
    mixed_precision: Literal["off", "bf16"] = Field(
        "off",
        description="bf16: the sharded parameters are gathered and computed in bfloat16 while the float32 master "
        "copy is what the optimiser updates, and gradients are reduced in float32. off: everything in model.dtype.",
    )
    cpu_offload: bool = Field(
        False,
        description="Keep the sharded parameters, gradients and optimiser state in CPU memory between uses "
        "(GPU runs: fits larger models at the cost of step time).",
    )
    activation_checkpointing: bool = Field(
        False, description="Recompute each decoder layer's activations in the backward pass instead of storing them."
    )

    @property
    def world_size(self) -> int:
        return self.procs_per_node * self.nodes

    @model_validator(mode="after")
    def _mesh_fits(self) -> ParallelSpec:
        if self.sharding == "hybrid" and self.nodes == 1:
            raise field_error(
                self, "sharding", "hybrid shards within a node and replicates across nodes: it needs nodes > 1 "
                "(on one node use 'full')",
            )  # fmt: skip
        return self
