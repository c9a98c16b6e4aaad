"""The generic Registry, exercised on fresh instances so the global registries stay untouched."""

import pytest

from trainers.registry import Registry, UnknownNameError


def _fresh() -> Registry:
    registry: Registry = Registry("widget")

    @registry.register("alpha")
    def alpha() -> str:
        return "a"

    @registry.register("beta")
    def beta() -> str:
        return "b"

    return registry


def test_it_returns_the_function_registered_under_a_name():
    registry = _fresh()
    assert registry.get("beta")() == "b"
    assert registry.names() == ["alpha", "beta"]
    assert "alpha" in registry and "gamma" not in registry


def test_it_refuses_to_register_a_taken_name():
    registry = _fresh()
    with pytest.raises(ValueError, match="widget 'alpha' is already registered"):
        registry.register("alpha")(lambda: "other")
    assert registry.get("alpha")() == "a"


def test_a_lookup_error_lists_the_valid_names():
    registry = _fresh()
    with pytest.raises(KeyError) as caught:
        registry.get("gamma")
    assert str(caught.value) == "unknown widget 'gamma'; valid: alpha, beta"


def test_a_lookup_error_is_also_a_value_error_for_config_validation():
    with pytest.raises(ValueError, match="valid: alpha, beta"):
        _fresh().get("gamma")
    assert issubclass(UnknownNameError, KeyError)
