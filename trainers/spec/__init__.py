"""The settings of a run: one typed, validated, JSON-serialisable schema (`RunSpec`), one module per
section, and presets as named bundles of values.

The studio renders its forms from `RunSpec.model_json_schema()` and validates stored configs with
`RunSpec.model_validate`; the CLI reads the same thing from YAML. Nothing here imports runtime code
(torch, transformers, an engine, an environment): validators that need a catalogue's names read the
torch-free catalogues (`algorithms.catalog`, `curriculum.catalog`, `rewards.catalog`,
`rollout.environments.catalog`, `data.procedural.catalog`).
"""

from trainers.spec.algorithm import AlgorithmSpec
from trainers.spec.base import Section, validation_errors
from trainers.spec.curriculum import CurriculumSpec, step_rollouts
from trainers.spec.data import DataSpec, ProceduralSpec
from trainers.spec.model import HUB_ID, LoraSpec, ModelSpec, looks_local, model_folder_error, model_path_shape_error
from trainers.spec.optim import LOGPROB_CHUNK_HELP, LOGPROB_CHUNK_MIB, PRECISION, PRECISION_HELP, OptimSpec
from trainers.spec.parallel import ParallelSpec
from trainers.spec.presets import PRESET_DESCRIPTIONS, PRESETS, apply_preset, preset_values
from trainers.spec.rollout import AsyncSpec, EnvironmentSpec, RolloutSpec, TokenBounds, token_bounds
from trainers.spec.rubric import CriterionSpec, RewardSpec, RubricSpec
from trainers.spec.run import CheckpointSpec, EvalSpec, RunSpec, ValidationSpec
from trainers.spec.teacher import TeacherModelSpec, TeacherSpec
from trainers.spec.warm_up import WarmUpSpec

__all__ = ["Section", "validation_errors", "LoraSpec", "HUB_ID", "looks_local", "model_path_shape_error", "model_folder_error", "ModelSpec", "ProceduralSpec", "DataSpec", "CriterionSpec", "RubricSpec", "RewardSpec", "AlgorithmSpec", "RolloutSpec", "AsyncSpec", "EnvironmentSpec", "TokenBounds", "token_bounds", "LOGPROB_CHUNK_MIB", "LOGPROB_CHUNK_HELP", "PRECISION", "PRECISION_HELP", "OptimSpec", "ParallelSpec", "CurriculumSpec", "step_rollouts", "CheckpointSpec", "EvalSpec", "ValidationSpec", "WarmUpSpec", "TeacherSpec", "TeacherModelSpec", "RunSpec", "PRESETS", "PRESET_DESCRIPTIONS", "preset_values", "apply_preset"]
