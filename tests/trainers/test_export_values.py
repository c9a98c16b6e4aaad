"""What a run's exports carry of its user text is data, never code (trainers.exports.embed): a TRL
script of a hostile run name, description-like title, criterion name, dataset field and setting value is
valid Python whose docstring and values equal that text, and running it executes none of it; a verl
YAML of the same loads to the same settings, its header all comments."""

import ast
import subprocess
import sys

import pytest
import yaml

from trainers.exports import to_trl, to_verl
from trainers.exports.embed import comment, docstring, identifier, literal
from trainers.spec import RunSpec


def escape(marker) -> str:
    """Text that, pasted as code into a docstring, a string, a comment or YAML, writes `marker`."""
    code = f"__import__('pathlib').Path({str(marker)!r}).write_text('ran')"
    return (f'x"""\n{code}\n"""\' + {code!r} + \'\\\n{code} #\r{code}\u2028{code}\x85- key: {code}'
            "\n'''\n" + code + "\n'''")  # fmt: skip


def hostile_spec(marker) -> RunSpec:
    text = escape(marker)
    return RunSpec.model_validate({
        "name": text,
        "model": {"path": f"/models/{text}"},
        "data": {"path": f"/data/{text}.jsonl", "prompt_field": text, "answer_field": text, "extra_fields": [text],
                 "system_prompt": text},
        "rubric": {"criteria": [{"name": "class", "kind": "regex", "params": {"pattern": f"({text})?"}},
                                {"name": "main", "kind": "contains", "params": {"keywords": [text]}}]},
        "rollout": {"stop": [text]},
        "algorithm": {"group_size": 2},
        "optim": {"prompts_per_step": 2, "micro_batch_size": 2, "total_steps": 1},
        "checkpoint": {"output_dir": f"/out/{text}"},
    })  # fmt: skip


def assignments(tree: ast.Module) -> dict[str, object]:
    return {node.targets[0].id: node.value for node in tree.body if isinstance(node, ast.Assign)}


def test_a_hostile_run_exports_as_valid_python_whose_values_are_the_text(tmp_path):
    marker = tmp_path / "marker"
    spec = hostile_spec(marker)
    text = escape(marker)
    export = to_trl(spec, title=f"Run #7 {text}")
    tree = ast.parse(export.text)  # valid Python, whatever the names held
    doc = ast.get_docstring(tree, clean=False)
    assert doc.startswith(f"Run #7 {text} as TRL GRPO")  # the docstring holds the title exactly
    values = assignments(tree)
    config = ast.literal_eval(values["CONFIG"])
    assert config == export.settings and config["run_name"] == text and config["output_dir"] == f"/out/{text}"
    assert config["generation_kwargs"] == {"stop_strings": [text]}
    assert ast.literal_eval(values["MODEL"]) == f"/models/{text}"
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    # A keyword and a name the script uses itself become other function names, each once.
    assert [e.id for e in values["REWARD_FUNCS"].elts] == ["criterion_class", "main_2"]
    assert repr(f"({text})?") in ast.get_docstring(functions["criterion_class"], clean=False)  # params as repr
    constants = {n.value for n in ast.walk(functions["load_rows"]) if isinstance(n, ast.Constant)}
    assert f"/data/{text}.jsonl" in constants
    shaped = {n.value for n in ast.walk(functions["_shape"]) if isinstance(n, ast.Constant)}
    assert text in shaped  # the fields and the system prompt, as string constants
    script = tmp_path / export.filename
    script.write_text(export.text, encoding="utf-8")
    # Loaded the way a reader looks at it (not as __main__, which would train): none of the text runs.
    # trl may be missing here: the module's first statements (where a closed docstring would have put the
    # code) run before its import either way.
    done = subprocess.run([sys.executable, "-c", f"import runpy; runpy.run_path({str(script)!r}, run_name='x')"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert not marker.exists(), done.stderr
    assert done.returncode == 0 or "No module named 'trl'" in done.stderr, done.stderr[-2000:]


def test_the_verl_export_of_a_hostile_run_loads_to_its_settings(tmp_path):
    marker = tmp_path / "marker"
    spec = hostile_spec(marker)
    text = escape(marker)
    export = to_verl(spec, title=f"Run #7 {text}")
    config = yaml.safe_load(export.text)
    assert config == export.settings
    assert config["trainer"]["experiment_name"] == text and config["data"]["train_files"] == f"/data/{text}.jsonl"
    header = export.text.split("\ndata:")[0]
    for line in header.split("\n"):
        assert line.startswith("#"), line  # the title's line breaks did not end the comment
    # read as YAML (which breaks lines at NEL and U+2028 too), the file holds no key the export did not write
    assert set(config) == {"data", "actor_rollout_ref", "algorithm", "reward_model", "custom_reward_function",
                           "trainer"}  # fmt: skip


@pytest.mark.parametrize(
    "text",
    ['"""', 'a"""b', "ends with a quote\"", "ends with a backslash\\", "\\N{BULLET} \\x00 \\u2028", "nul \x00 here",
     "cr \r lf \n nel \x85 ls \u2028 ps \u2029", "surrogate \ud800 alone", "tab\tand \x7f", "'''"],
)  # fmt: skip
def test_a_docstring_literal_holds_any_text_exactly(text):
    source = docstring(text)
    assert ast.literal_eval(source) == text
    source.encode("utf-8")  # writable as a UTF-8 file
    tree = ast.parse(f"{source}\nVALUE = 1\n")
    assert ast.get_docstring(tree, clean=False) == text and len(tree.body) == 2


def test_literals_identifiers_and_comments_hold_their_values():
    value = {"a": [1, 2.5, None, True, "x'\"y\u2028"], "inf": float("inf"), "ninf": float("-inf")}
    assert eval(literal(value)) == value  # noqa: S307 - our own literal, checked here
    assert ast.literal_eval(literal({"s": "\ud800"})) == {"s": "\ud800"}
    taken: set[str] = {"main"}
    names = [identifier(n, taken) for n in ("class", "main", "main", "9lives", "é", "match")]
    assert names == ["criterion_class", "main_2", "main_3", "criterion_9lives", "criterion__", "criterion_match"]
    lines = comment("one\ntwo\rthree\u2028four\x85five")
    assert lines == ["# one", "# two\\x0dthree\\u2028four\\x85five"]
    assert yaml.safe_load("\n".join(lines) + "\nkey: 1\n") == {"key": 1}


def test_a_script_with_a_hostile_name_still_builds_its_config():
    trl = pytest.importorskip("trl")
    spec = hostile_spec("/nonexistent/marker")
    scope = {"__name__": "exported"}
    exec(compile(to_trl(spec).text, "export.py", "exec"), scope)  # noqa: S102 - checked: it runs no user text
    assert isinstance(scope["config"], trl.GRPOConfig) and scope["config"].run_name == escape("/nonexistent/marker")


BUILT_IN_RUBRIC = [
    {"name": "keywords", "kind": "contains", "params": {"keywords": ["Paris", 'x"""y'], "mode": "fraction"}},
    {"name": "all_of", "kind": "contains", "params": {"keywords": ["a", "B"], "mode": "all", "case_sensitive": True}},
    {"name": "clean", "kind": "contains", "params": {"keywords": ["sorry"], "mode": "any", "forbidden": True}},
    {"name": "words", "kind": "length", "params": {"unit": "words", "target_min": 2, "target_max": 4, "slope": 0.25}},
    {"name": "chars", "kind": "length", "params": {"unit": "chars", "target_min": 0, "target_max": 10, "slope": 0.01}},
    {"name": "same", "kind": "exact_match", "params": {}},
    {"name": "exact", "kind": "exact_match", "params": {"case_sensitive": True, "strip_punctuation": True}},
]
COMPLETIONS = ["Paris", 'paris x"""Y is it', "a B", "Sorry, I can't", "one two three four five six seven", "", "a"]
ANSWERS = ["paris", "no", "a  B", ["Sorry I cant", "x"], "7", "", "A."]


def exported_functions(script: str) -> dict:
    """The script's reward functions, run without trl: its function definitions alone, compiled."""
    tree = ast.parse(script)
    module = ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef)], type_ignores=[])
    scope: dict = {}
    exec(compile(module, "export.py", "exec"), scope)  # noqa: S102 - the export's own functions, checked here
    return scope


def test_built_in_criteria_export_as_reward_functions_that_score_as_the_studio():
    from trainers.rewards.criteria import CRITERIA
    from trainers.rewards.sample import Sample

    run = RunSpec.model_validate({"model": {"path": "/m"}, "data": {"path": "/d.jsonl"},
                                  "rubric": {"criteria": BUILT_IN_RUBRIC}})  # fmt: skip
    export = to_trl(run)
    assert "rubric.criteria" not in {u.field for u in export.unmapped}  # carried over, scoring and all
    functions = exported_functions(export.text)
    for criterion in run.rubric.criteria:
        scorer = CRITERIA.get(criterion.kind).from_params(criterion.params)
        samples = [
            Sample(prompt="q", completion=c, fields={"answer": a}) for c, a in zip(COMPLETIONS, ANSWERS, strict=True)
        ]
        studio = [scorer.score_one(sample).score for sample in samples]
        exported = functions[criterion.name]
        assert exported(COMPLETIONS, answer=ANSWERS) == pytest.approx(studio), criterion.name
        conversational = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]  # TRL's chat completions
        assert exported(conversational, answer=ANSWERS) == pytest.approx(studio), criterion.name
    scores = {tuple(functions[c.name](COMPLETIONS, answer=ANSWERS)) for c in run.rubric.criteria}
    assert len(scores) > 1 and any(0 < s < 1 for row in scores for s in row)  # not constants


def test_other_criteria_stay_stubs_that_say_what_to_write():
    run = RunSpec.model_validate({"model": {"path": "/m"}, "data": {"path": "/d.jsonl"},
                                  "rubric": {"criteria": [{"name": "right", "kind": "exact_match",
                                                           "params": {"extract": "last_line"}},
                                                          BUILT_IN_RUBRIC[3]]}})  # fmt: skip
    export = to_trl(run)
    functions = exported_functions(export.text)
    with pytest.raises(NotImplementedError, match="criterion 'right'"):
        functions["right"](["4"])
    assert functions["words"](["two words"]) == [1.0]
    assert "stub for each other criterion" in {u.field: u.why for u in export.unmapped}["rubric.criteria"]
