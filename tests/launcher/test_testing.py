"""Which tests `./studioctl test`'s second pass (PostgreSQL + Redis) runs again (launcher/testing.py)."""

from launcher.testing import TEAM_SCALE_TESTS, _team_scale_args


def test_without_paths_the_second_pass_runs_every_database_bound_package_with_the_options_given():
    assert _team_scale_args(["-q", "-x"]) == [*TEAM_SCALE_TESTS, "-q", "-x"]


def test_a_folder_above_database_bound_tests_stands_for_those_under_it():
    assert _team_scale_args(["tests/studio", "-q"]) == [
        t for t in TEAM_SCALE_TESTS if t.startswith("tests/studio/")
    ] + ["-q"]
    assert _team_scale_args(["tests"]) == list(TEAM_SCALE_TESTS)


def test_a_path_inside_a_database_bound_package_is_run_again_as_given():
    assert _team_scale_args(["tests/studio/runs/test_runs.py::RunsTest", "-x"]) == [
        "tests/studio/runs/test_runs.py::RunsTest",
        "-x",
    ]


def test_paths_that_hold_no_database_bound_test_are_not_run_again():
    assert _team_scale_args(["tests/trainers", "tests/studio/datasets"]) == []


def test_help_says_what_studioctl_test_does_then_shows_pytests_options_once():
    import subprocess
    import sys

    from launcher.processes import ROOT

    out = subprocess.run([sys.executable, "-m", "launcher", "test", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120).stdout  # fmt: skip
    assert out.startswith("usage: ./studioctl test [pytest arguments]")
    assert "STUDIO_TEST_TEAM_SCALE" in out
    assert out.count("usage: python -m pytest") == 1  # pytest's help once: no second pass runs for it
