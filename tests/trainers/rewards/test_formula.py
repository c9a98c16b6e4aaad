import pytest

from trainers.rewards.formula import FormulaError, compile_formula, validate_formula

NAMES = ["correct", "format", "length"]
SCORES = {"correct": 1.0, "format": 0.5, "length": 0.25}


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("correct + format", 1.5),
        ("2 * correct - format / 2", 1.75),
        ("correct * min(format, 1)", 0.5),
        ("max(format, length, 0.3)", 0.5),
        ("abs(length - correct)", 0.75),
        ("clip(correct + format, 0, 1.2)", 1.2),
        ("format ** 2", 0.25),
        ("correct if format > 0.4 else 0", 1.0),
        ("(format >= 0.5) + (length > 0.5)", 1.0),
        ("0 < length < format", 1.0),
        ("correct and not length", 0.0),
        ("-correct", -1.0),
    ],
)
def test_it_evaluates_allowed_expressions(formula, expected):
    assert compile_formula(formula, NAMES)(SCORES) == pytest.approx(expected)


def test_an_unknown_name_lists_the_valid_names():
    with pytest.raises(FormulaError, match=r"unknown name 'corect'.*correct, format, length"):
        validate_formula("corect + format", NAMES)


@pytest.mark.parametrize(
    ("formula", "message"),
    [
        ("__import__('os').system('true')", "unknown function"),
        ("correct.__class__", "Attribute is not allowed"),
        ("[correct]", "List is not allowed"),
        ("'text'", "only numbers"),
        ("lambda: 1", "Lambda is not allowed"),
        ("clip(correct, 0)", "clip() takes 3 arguments, got 2"),
        ("min(correct)", "at least 2"),
        ("correct +", "invalid formula"),
        ("", "empty"),
    ],
)
def test_it_refuses_anything_outside_the_whitelist(formula, message):
    with pytest.raises(FormulaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_formula(formula, NAMES)


def test_division_by_zero_is_a_formula_error_at_evaluation():
    evaluate = compile_formula("correct / length", NAMES)
    with pytest.raises(FormulaError, match="ZeroDivisionError"):
        evaluate({**SCORES, "length": 0.0})


def test_a_huge_power_overflows_instead_of_hanging():
    with pytest.raises(FormulaError, match="OverflowError"):
        compile_formula("10 ** 10 ** 10", NAMES)(SCORES)


def test_the_rubric_spec_refuses_a_formula_over_unknown_criteria():
    from pydantic import ValidationError

    from trainers.spec import RubricSpec

    criteria = [{"name": "correct", "kind": "length"}]
    with pytest.raises(ValidationError, match="unknown name 'format' in formula; criterion names: correct"):
        RubricSpec(criteria=criteria, combine="formula", formula="correct * format")
    assert RubricSpec(criteria=criteria, combine="formula", formula="correct * 2").formula == "correct * 2"
