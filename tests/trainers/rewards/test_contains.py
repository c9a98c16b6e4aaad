from tests.trainers.rewards.helpers import score_one

TEXT = "We use Python and Rust."


def test_fraction_counts_the_keywords_found():
    result = score_one("contains", {"keywords": ["python", "rust", "go", "java"]}, TEXT)
    assert result.score == 0.5
    assert result.explanation.startswith("found 2/4")


def test_all_needs_every_keyword():
    assert score_one("contains", {"keywords": ["python", "rust"], "mode": "all"}, TEXT).score == 1.0
    assert score_one("contains", {"keywords": ["python", "go"], "mode": "all"}, TEXT).score == 0.0


def test_any_needs_one_keyword():
    assert score_one("contains", {"keywords": ["go", "rust"], "mode": "any"}, TEXT).score == 1.0
    assert score_one("contains", {"keywords": ["go", "java"], "mode": "any"}, TEXT).score == 0.0


def test_case_sensitive_matching():
    assert score_one("contains", {"keywords": ["python"], "case_sensitive": True}, TEXT).score == 0.0


def test_forbidden_keywords_score_the_reverse():
    params = {"keywords": ["sorry", "cannot", "unable", "apolog"], "forbidden": True}
    assert score_one("contains", params, "Here it is.").score == 1.0
    assert score_one("contains", params, "Sorry, I cannot.").score == 0.5
