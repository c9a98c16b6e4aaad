from trainers.curriculum.budgets import ROLLOUT_BUDGETS
from trainers.curriculum.catalog import BUDGETS, SAMPLERS
from trainers.curriculum.samplers import PROMPT_SAMPLERS


def test_the_catalog_lists_every_registered_sampler_and_budget():
    assert PROMPT_SAMPLERS.names() == list(SAMPLERS)
    assert ROLLOUT_BUDGETS.names() == list(BUDGETS)
