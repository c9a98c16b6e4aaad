"""A sweep's Optuna study: made, loaded with the sweep's sampler and pruner, and its trials' handles.
The search, the pruning rules and the importances are Optuna's; this module only names them.

Optuna is imported where it is used, never at module import: it takes a second or more to import (and its
storage more to set up), which the web tier's start and the pages that do not need it must not pay."""

from __future__ import annotations

from typing import Any

from studio.sweeps import space, storage
from studio.sweeps.models import GRID, HALVING, MEDIAN, RANDOM, T_COMPLETE, TPE, Sweep

HALVING_REDUCTION = 3  # ASHA keeps the best third of the trials at each rung
HALVING_MIN_STEPS = 1


def create_study(sweep: Sweep) -> None:
    """The sweep's study in the studio's database (its name: Sweep.study_name)."""
    import optuna

    optuna.create_study(storage=storage.storage(), study_name=sweep.study_name, direction=sweep.direction,
                        load_if_exists=True)  # fmt: skip


def load(sweep: Sweep, draws: int = 0):
    """The sweep's study as its driver uses it. The sampler is seeded with the sweep's seed plus `draws`
    (the trials asked for so far): a sampler is not stored, and one seeded alike at every load would draw
    again the values of its last load before the search has results to go on."""
    import optuna

    return optuna.load_study(study_name=sweep.study_name, storage=storage.storage(),
                             sampler=sampler(sweep, draws), pruner=pruner(sweep))  # fmt: skip


def sampler(sweep: Sweep, draws: int = 0):
    import optuna

    seed = sweep.seed + draws
    if sweep.sampler == GRID:  # its seed orders the grid: the same at every load, or the ids would not match
        return optuna.samplers.GridSampler(space.grid(sweep.parameters), seed=sweep.seed)
    if sweep.sampler == RANDOM:
        return optuna.samplers.RandomSampler(seed=seed)
    if sweep.sampler == TPE:
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(10, max(2, sweep.max_trials // 3)))
    raise ValueError(f"unknown sampler {sweep.sampler!r}")


def pruner(sweep: Sweep):
    import optuna

    if sweep.pruner == MEDIAN:
        return optuna.pruners.MedianPruner(n_startup_trials=sweep.pruner_startup_trials, n_warmup_steps=0)
    if sweep.pruner == HALVING:
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=HALVING_MIN_STEPS,
                                                      reduction_factor=HALVING_REDUCTION)  # fmt: skip
    return optuna.pruners.NopPruner()


def rule(sweep: Sweep) -> str:
    """The pruning rule in words, as a pruned run says it was pruned by."""
    if sweep.pruner == MEDIAN:
        return (f"the median rule (its {sweep.objective} below the median of the completed trials at that step, "
                f"after {sweep.pruner_startup_trials} completed)")  # fmt: skip
    if sweep.pruner == HALVING:
        return f"successive halving (ASHA: the best 1/{HALVING_REDUCTION} of the trials at each rung go on)"
    return "no rule"


def handle(study, number: int):
    """A live handle (optuna.trial.Trial) on the study's trial `number`, to report to and ask."""
    import optuna

    store = storage.storage()  # the process-wide storage the study was loaded with
    study_id = store.get_study_id_from_name(study.study_name)
    return optuna.trial.Trial(study, store.get_trial_id_from_study_id_trial_number(study_id, number))


def importances(sweep: Sweep) -> dict[str, float]:
    """{parameter: importance} from Optuna's fANOVA over the completed trials; {} before there are enough
    (two completed trials with different values)."""
    import optuna

    # Counted on the studio's rows first: a page of a sweep with too few results never loads Optuna.
    if sweep.trials.filter(state=T_COMPLETE).count() < 2:
        return {}
    study = load(sweep)
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if len(done) < 2 or len({tuple(sorted(t.params.items())) for t in done}) < 2:
        return {}
    try:
        found: dict[str, Any] = optuna.importance.get_param_importances(study)
    except (ValueError, RuntimeError):  # a parameter with one value only among completed trials
        return {}
    return {name: float(value) for name, value in found.items()}
