"""The torch-free catalog the studio reads lists exactly the names the registries hold."""

import inspect

import pytest

from trainers.algorithms import catalog
from trainers.algorithms.advantages import ADVANTAGES
from trainers.algorithms.aggregation import LOSS_AGGREGATIONS
from trainers.algorithms.distillation import DISTILL_SIGNALS
from trainers.algorithms.kl import KL_ESTIMATORS
from trainers.algorithms.mismatch import OFF_POLICY_CORRECTIONS
from trainers.algorithms.policy_losses import POLICY_LOSSES

PAIRS = [
    (catalog.ADVANTAGE_ESTIMATORS, ADVANTAGES),
    (catalog.POLICY_LOSSES, POLICY_LOSSES),
    (catalog.LOSS_AGG_MODES, LOSS_AGGREGATIONS),
    (catalog.KL_ESTIMATORS, KL_ESTIMATORS),
    (catalog.OFF_POLICY_CORRECTIONS, OFF_POLICY_CORRECTIONS),
    (catalog.DISTILL_SIGNALS, DISTILL_SIGNALS),
]


@pytest.mark.parametrize(("names", "registry"), PAIRS, ids=lambda x: getattr(x, "kind", ""))
def test_catalog_names_equal_registry_names(names, registry):
    assert list(names) == registry.names()


@pytest.mark.parametrize(("names", "registry"), PAIRS, ids=lambda x: getattr(x, "kind", ""))
def test_every_entry_of_a_registry_has_the_same_signature(names, registry):
    signatures = {name: list(inspect.signature(registry.get(name)).parameters) for name in registry.names()}
    first = next(iter(signatures.values()))
    assert all(params == first for params in signatures.values()), signatures
