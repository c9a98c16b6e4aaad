import subprocess
import sys

from trainers.rewards.catalog import CRITERION_KINDS
from trainers.rewards.criteria import CRITERIA


def test_every_catalog_kind_has_an_implementation_with_its_params_model():
    assert CRITERIA.names() and set(CRITERIA.names()) == set(CRITERION_KINDS)
    for kind, params in CRITERION_KINDS.items():
        assert CRITERIA.get(kind).params_model is params


def test_importing_the_rubric_does_not_import_torch_transformers_or_sympy():
    code = (
        "import sys, trainers.rewards.rubric, trainers.rewards.formula\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sympy', 'math_verify') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
