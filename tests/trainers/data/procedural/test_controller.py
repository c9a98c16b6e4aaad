"""The adaptive difficulty controller against sequences worked out by hand."""

import pytest

from trainers.data.procedural.controller import DifficultyController


def run(controller: DifficultyController, rates: list[float]) -> list[int]:
    return [controller.observe(r) for r in rates]


def test_a_window_of_two_moves_on_the_mean_of_two_steps_at_one_level():
    c = DifficultyController(level=3, lowest=1, highest=5, band=(0.25, 0.75), window=2)
    # step 1: one rate only -> stays 3; step 2: mean(0.9, 0.8) = 0.85 > 0.75 -> 4, window cleared;
    # step 3: one rate at 4 -> 4; step 4: mean(0.5, 0.2) = 0.35 in band -> 4, window slides;
    # step 5: mean(0.2, 0.1) = 0.15 < 0.25 -> 3; step 6: one rate -> 3; step 7: mean(0.6, 0.8) = 0.7 -> 3.
    assert run(c, [0.9, 0.8, 0.5, 0.2, 0.1, 0.6, 0.8]) == [3, 4, 4, 4, 3, 3, 3]
    assert c.recent == [0.6, 0.8]


def test_one_lucky_step_does_not_move_the_level_back():
    c = DifficultyController(level=2, lowest=1, highest=8, band=(0.3, 0.7), window=3)
    # 1.0, 1.0, 1.0 -> mean 1 -> 3; at 3: 0.9 (a lucky step), 0.2, 0.2 -> mean 0.433 in band -> stays 3.
    assert run(c, [1.0, 1.0, 1.0, 0.9, 0.2, 0.2]) == [2, 2, 3, 3, 3, 3]


def test_the_level_stays_within_its_bounds():
    top = DifficultyController(level=2, lowest=1, highest=2, band=(0.2, 0.8), window=1)
    assert run(top, [1.0, 1.0]) == [2, 2]
    bottom = DifficultyController(level=1, lowest=1, highest=4, band=(0.2, 0.8), window=1)
    assert run(bottom, [0.0, 0.0, 0.9, 0.0]) == [1, 1, 2, 1]


def test_rates_on_the_band_edges_keep_the_level():
    c = DifficultyController(level=2, lowest=1, highest=3, band=(0.25, 0.75), window=1)
    assert run(c, [0.75, 0.25]) == [2, 2]  # strictly above high / below low moves it


def test_state_round_trips():
    c = DifficultyController(level=2, lowest=1, highest=5, band=(0.25, 0.75), window=3)
    run(c, [0.9, 0.9, 0.9, 0.5])
    copy = DifficultyController(level=1, lowest=1, highest=5, band=(0.25, 0.75), window=3)
    copy.load_state_dict(c.state_dict())
    assert run(copy, [0.9, 0.9]) == run(c, [0.9, 0.9]) == [3, 4]


@pytest.mark.parametrize(
    "kwargs,message",
    [({"level": 0}, "outside"), ({"band": (0.8, 0.2)}, "low < high")],
)
def test_bad_settings_are_refused(kwargs, message):
    base = {"level": 1, "lowest": 1, "highest": 3, "band": (0.2, 0.8), "window": 1}
    with pytest.raises(ValueError, match=message):
        DifficultyController(**{**base, **kwargs})
