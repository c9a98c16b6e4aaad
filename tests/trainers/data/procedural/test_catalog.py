"""The torch-free task catalogue the settings read and the generators list the same tasks, with the
same levels and environments, and every environment a task names is an environment kind."""

from trainers.data.procedural.catalog import TASKS
from trainers.data.procedural.generators import GENERATORS
from trainers.rollout.environments.catalog import ENVIRONMENT_KINDS


def test_the_catalogue_lists_every_generator_with_its_levels_and_environment():
    assert GENERATORS.names() == TASKS.names()
    for name in TASKS.names():
        generator, info = GENERATORS.get(name), TASKS.get(name)
        assert (generator.max_level, generator.environment) == (info.max_level, info.environment)
        assert info.environment is None or info.environment in ENVIRONMENT_KINDS
