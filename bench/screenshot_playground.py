"""Retake the README's screenshot of the playground (docs/playground.png).

Not a test (nothing runs it automatically). It starts the serving tests' studio (tests/studio/serving/served.py:
daphne, a Celery worker that serves models, a private Redis, a SQLite file in a temp folder) with the real
SmolLM2-135M-Instruct as a run's base model, and as its "checkpoint" a run of the real demo trained for
`--steps` steps on the CPU here (or, with --steps 0, a copy of the base). Then it asks both the same question in
Debian's Chromium at 1366x900 and writes the PNG once both replies have streamed in.

    .venv/bin/python bench/screenshot_playground.py [--steps 0] [--out docs/playground.png]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.live_studio import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.studio.serving.served import PASSWORD, start_serving_studio  # noqa: E402

QUESTION = "What is 7 + 5?"
SYSTEM_PROMPT = "Answer with the number only."


def trained_copy(model: Path, out: Path, steps: int) -> Path:
    """`model` after `steps` steps of the real demo (trainers.demos.real) on this machine, as a folder."""
    from trainers.demos.real import make_real_dataset, real_demo_spec
    from trainers.report import MemoryReporter
    from trainers.run.loop import train
    from trainers.spec import RunSpec

    data = make_real_dataset(out / "sums.jsonl")
    spec = RunSpec.model_validate(real_demo_spec(model, data, out / "run", optim={"total_steps": steps},
                                                 validation={"every_n_steps": steps}))  # fmt: skip
    result = train(spec, MemoryReporter())
    if result.status != "succeeded" or result.checkpoint is None:
        raise SystemExit(f"the demo run ended {result.status}: {result.detail}")
    return Path(result.checkpoint)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=0, help="demo steps for the checkpoint (0: a copy of the base)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "playground.png")
    args = parser.parse_args()

    from trainers.models.pretrained import SMOLLM2, install

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        models = tmp_path / "models"
        base = Path(install(SMOLLM2, ROOT / "var" / "demo"))  # converted once, by setup
        shutil.copytree(base, models / "base")
        warm = trained_copy(base, tmp_path, args.steps) if args.steps else base
        shutil.copytree(warm, models / "warm")
        studio, records = start_serving_studio(tmp_path / "studio", models)
        try:
            run = records["runs"]["Ana's lab"]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                page, _ = studio.signed_in_page(browser, "ana", PASSWORD)
                page.goto(f"{studio.base_url}/runs/{run}/playground/")
                page.locator("select[name=model]").select_option(f"run-{run}/base")
                page.locator("select[name=model2]").select_option(f"run-{run}/step-4")
                page.locator("input[name=max_tokens]").fill("40")
                page.locator("textarea[name=system]").fill(SYSTEM_PROMPT)
                page.locator("textarea[name=message]").fill(QUESTION)
                page.locator("[data-send]").click()
                columns = page.locator("[data-column]")
                for i in range(2):
                    reply = columns.nth(i).locator("[data-role=assistant]")
                    expect(reply).to_have_attribute("data-done", "1", timeout=600_000)
                page.screenshot(path=str(args.out))
                browser.close()
        finally:
            studio.stop()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
