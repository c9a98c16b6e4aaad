import pytest

from trainers.data.prompts import Prompt
from trainers.data.rows import PromptRow


def make_prompts(count: int) -> list[Prompt]:
    """`count` prompts p0, p1, ... (ids only matter to samplers and budgets)."""
    return [Prompt(PromptRow(f"p{i}", i + 1, f"prompt {i}", {}), f"prompt {i}", [i + 1]) for i in range(count)]


@pytest.fixture
def prompts() -> list[Prompt]:
    return make_prompts(6)


def run_spec(prompts_per_step: int = 3, group_size: int = 4, **curriculum):
    """A RunSpec for budget arithmetic: nothing is loaded, so the paths need not exist."""
    from trainers.spec import RunSpec

    code = "def score(completion, **kw):\n    return 1.0"
    return RunSpec.model_validate({
        "model": {"path": "./model"},
        "data": {"path": "prompts.jsonl"},
        "rubric": {"criteria": [{"name": "one", "kind": "python", "params": {"code": code}}]},
        "optim": {"prompts_per_step": prompts_per_step},
        "algorithm": {"group_size": group_size},
        "curriculum": curriculum,
    })  # fmt: skip
