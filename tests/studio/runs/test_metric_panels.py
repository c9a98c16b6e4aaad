"""Every metric key the trainers emit lands in the panel meant for it (studio.runs.panels, which
the run and compare pages' JS apply; tests/browser/test_js_units.py checks the JS agrees)."""

import re

from studio.runs.panels import PANELS, panel_for


def trainer_metric_keys() -> set[str]:
    """The keys a training step reports, as the trainer tests know them (without training a model)."""
    import torch

    from tests.trainers.run.test_loop import STEP_KEYS
    from trainers.algorithms.mismatch import logprob_gap
    from trainers.algorithms.policy_losses import PolicyLossOutput

    zero = torch.tensor(0.0)
    losses = PolicyLossOutput(*[zero] * 6).metrics()
    mask = torch.ones(1, 2)
    gaps = logprob_gap(torch.zeros(1, 2), torch.zeros(1, 2), mask)
    # Step keys the loop test does not list (trainers/loop.py): actor/kl only with a KL loss,
    # rollout/tis_clip_frac only with TIS on a separate sampler, perf/gpu_mem_peak_gb only on CUDA.
    step = {"actor/kl", "rollout/tis_clip_frac", "perf/gen_tokens_per_s", "perf/train_tokens_per_s",
            "perf/gpu_mem_peak_gb", "data/generation_rounds", "data/groups_kept", "tokens/generated",
            "tokens/trained"}  # fmt: skip
    # An evaluation's (tests/trainers/run/test_evaluate.py).
    evaluation = {"eval/reward/mean", "eval/reward/std", "eval/reward/any/mean", "eval/pass@2"}
    # A multi-turn run's (trainers/rollouts.py: the keys agreed for issue 12), with one tool.
    episode = {"episode/turns_mean", "episode/tool_calls_mean", "episode/tool_calls/calculator",
               "episode/tool_error_rate", "episode/well_formed_call_rate", "episode/answered_frac",
               "episode/observation_tokens_mean", "episode/ended_at_limit_frac", "timing/tool_s"}  # fmt: skip
    # Validation during training's (trainers/validation.py, k = 4, the letter criterion).
    validation = {"val/reward/mean", "val/reward/std", "val/reward/letter/mean", "val/pass@1", "val/pass@2",
                  "val/pass@4", "timing/validation_s"}  # fmt: skip
    # An asynchronous run's (trainers.run.pipeline.async_metrics with max_staleness 1, the loop's own
    # async/ keys) with an off-policy correction (trainers.algorithms.mismatch.Correction).
    from trainers.algorithms.mismatch import Correction
    from trainers.run.pipeline import async_metrics

    asynchronous = set(async_metrics([], 0, 1)) | set(Correction(mask, 1.0).metrics()) | {
        "async/dropped_stale", "async/dropped_stale_total", "async/queue_depth", "async/policy_version",
        "async/engine_busy", "async/trainer_busy", "timing/wait_s"}  # fmt: skip
    # Objectives of recent papers (tests/trainers/run/test_loop_objectives.py): guidance, token selections.
    objectives = {"guidance/loss_share", "guidance/prompt_frac", "guidance/sft_loss", "actor/forking_frac",
                  "actor/forking_entropy_threshold", "actor/cov_selected_frac"}  # fmt: skip
    return (
        set(STEP_KEYS) | set(losses) | set(gaps) | step | evaluation | episode | validation | asynchronous | objectives
    )


# Where each lands; None: no panel claims it, so the page draws it in its namespace's panel.
EXPECTED = {
    "reward/mean": "reward", "reward/std": "reward", "reward/letter/mean": "criteria",
    "reward/frac_zero_std_groups": "reward_other",
    "advantage/mean": "advantage", "advantage/std": "advantage", "advantage/min": "advantage",
    "advantage/max": "advantage",
    "actor/kl": "kl", "actor/entropy": "entropy", "actor/loss": "loss", "actor/grad_norm": "grad_norm",
    "actor/lr": "lr", "actor/clip_frac_low": "clip", "actor/clip_frac_high": "clip", "actor/dual_clip_frac": "clip",
    "actor/pg_loss": None, "actor/ppo_kl": None, "actor/ratio_mean": None,
    "response/length_mean": "length", "response/length_max": "length", "response/truncated_frac": "truncated",
    "rollout/logprob_gap_mean": "mismatch", "rollout/logprob_gap_max": "mismatch",
    "rollout/engine_trainer_kl": "mismatch", "rollout/tis_clip_frac": "mismatch",
    "perf/tokens_per_s": "tokens", "perf/gen_tokens_per_s": "tokens", "perf/train_tokens_per_s": "tokens",
    "perf/gpu_mem_peak_gb": None,
    "timing/generate_s": "timing", "timing/score_s": "timing", "timing/train_s": "timing",
    "timing/step_s": "timing_other",
    "data/epoch": None, "data/generation_rounds": None, "data/groups_kept": None,
    "tokens/generated": None, "tokens/trained": None,
    "episode/turns_mean": "turns", "episode/tool_calls_mean": "tool_calls",
    "episode/tool_calls/calculator": "tool_calls", "episode/tool_error_rate": "tool_quality",
    "episode/well_formed_call_rate": "tool_quality", "episode/answered_frac": "episode_ends",
    "episode/ended_at_limit_frac": "episode_ends", "episode/observation_tokens_mean": "observation",
    "timing/tool_s": "tool_time",
    "prompts/solved_frac": "prompts", "prompts/learnable_frac": "prompts", "prompts/never_solved_frac": "prompts",
    "prompts/unseen_frac": "prompts",
    "eval/reward/mean": None, "eval/reward/std": None, "eval/reward/any/mean": None, "eval/pass@2": None,
    "val/reward/mean": "val_reward", "val/reward/std": "val_reward", "val/reward/letter/mean": "val_criteria",
    "val/pass@1": "val_pass", "val/pass@2": "val_pass", "val/pass@4": "val_pass", "timing/validation_s": "timing_other",
    "async/staleness_mean": "staleness", "async/staleness_max": "staleness", "async/staleness_0": "staleness_hist",
    "async/staleness_1": "staleness_hist", "async/tokens_lag_0": "tokens_lag", "async/tokens_lag_1": "tokens_lag",
    "async/partial_frac": "partial", "async/dropped_stale": "dropped_stale", "async/dropped_stale_total": "dropped_stale",
    "async/queue_depth": "queue", "async/policy_version": "async_other", "async/engine_busy": "busy",
    "async/trainer_busy": "busy", "timing/wait_s": "timing_other",
    "correction/weight_mean": "correction", "correction/truncated_frac": "correction",
    "correction/rejected_frac": "correction",
    "guidance/loss_share": "guidance_share", "guidance/prompt_frac": "guidance_share",
    "guidance/sft_loss": "guidance_loss", "actor/forking_frac": "token_selection",
    "actor/cov_selected_frac": "token_selection", "actor/forking_entropy_threshold": "forking_threshold",
}  # fmt: skip


def test_every_key_the_trainers_emit_lands_in_its_panel():
    keys = trainer_metric_keys()
    assert keys - EXPECTED.keys() == set(), "a new metric key: say which panel shows it"
    got = {key: (panel.id if (panel := panel_for(key)) else None) for key in keys}
    assert got == {key: EXPECTED[key] for key in keys}


def test_a_key_lands_in_the_first_panel_that_claims_it():
    # reward/<criterion>/mean is also a reward/ key: the per-criterion panel comes first.
    ids = [p.id for p in PANELS]
    assert ids.index("criteria") < ids.index("reward_other") and ids.index("timing") < ids.index("timing_other")
    assert panel_for("reward/format/mean").id == "criteria"
    assert panel_for("reward/format/max").id == "reward_other"
    assert panel_for("episode/tool_calls/web_search").id == "tool_calls"  # a tool the form names
    assert panel_for("episode/something_new").id == "episode_other"


def test_only_the_panels_of_parts_of_a_whole_stack():
    # Time per step is the sum of its phases; the prompts' status fractions sum to 1; an asynchronous
    # step's rollouts (tokens) by staleness sum to those it trained on.
    assert [p.id for p in PANELS if p.stacked] == ["timing", "staleness_hist", "tokens_lag", "prompts"]


def test_the_prompt_status_fractions_share_the_prompts_panel():
    keys = ["prompts/solved_frac", "prompts/learnable_frac", "prompts/never_solved_frac", "prompts/unseen_frac"]
    assert {panel_for(key).id for key in keys} == {"prompts"}
    assert panel_for("prompts/solved_frac").title == "Prompts: solved / learnable / never solved"
    assert panel_for("prompts/other") is None


def test_validation_curves_sit_beside_their_training_curves():
    # The grid fills rows left to right: each val/ panel follows the training panel it mirrors.
    ids = [p.id for p in PANELS]
    assert ids[:5] == ["reward", "val_reward", "criteria", "val_criteria", "val_pass"]


def test_every_pattern_is_anchored_and_compiles_for_ascii_keys():
    for panel in PANELS:
        assert panel.pattern.startswith("^"), panel.id  # JS .test and re.search both scan otherwise
        re.compile(panel.pattern, re.ASCII)
