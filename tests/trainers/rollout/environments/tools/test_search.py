"""BM25 search over a document collection, checked against scores computed by hand."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.rollout.environments.base import EpisodeLimits
from trainers.rollout.environments.tools import TOOLS, ToolError
from trainers.rollout.environments.tools.search import BM25, Document

# Three documents, 8 words: avgdl = 8/3; k1 = 1.5, b = 0.75.
DOCS = [Document("", "cat sat mat"), Document("", "cat cat dog"), Document("", "dog bird")]


def test_scores_match_a_hand_computation():
    index = BM25(DOCS)
    # "cat" is in 2 of 3 docs: idf = ln(1 + 1.5 / 2.5) = ln 1.6 = 0.4700036
    # d0: |d| = 3, K = 1.5 * (0.25 + 0.75 * 3 / (8/3)) = 1.640625; tf 1: 0.4700036 * 2.5 / 2.640625 = 0.4449738
    # d1: tf 2: 0.4700036 * 2 * 2.5 / (2 + 1.640625) = 0.6454985
    cat = index.scores("cat")
    assert cat == pytest.approx({0: 0.4449738, 1: 0.6454985}, abs=1e-6)
    # "bird" is in 1 doc: idf = ln(1 + 2.5 / 1.5) = 0.9808293; d2: |d| = 2, K = 1.5 * (0.25 + 0.5625) = 1.21875
    # score = 0.9808293 * 2.5 / 2.21875 = 1.1051598
    assert index.scores("bird") == pytest.approx({2: 1.1051598}, abs=1e-6)
    assert math.isclose(index.idf("cat"), math.log(1.6))
    # Query terms add up; case and punctuation do not matter.
    assert index.scores("Cat, BIRD!") == pytest.approx({0: 0.4449738, 1: 0.6454985, 2: 1.1051598}, abs=1e-6)
    assert index.search("cat bird", top_k=2) == [(pytest.approx(1.1051598), 2), (pytest.approx(0.6454985), 1)]


@pytest.fixture
def collection(tmp_path):
    path = tmp_path / "docs.jsonl"
    rows = [
        {"title": "Cats", "text": "The cat sat on the mat."},
        {"title": "Dogs", "text": "A dog barks at the cat. " * 20},
        {"title": "Birds", "text": "A bird sings."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def search(params, query):
    return TOOLS.get("search").create(params, EpisodeLimits()).call("search", {"query": query})


def test_the_tool_returns_the_best_documents_with_titles(collection):
    shown = search({"dataset": str(collection), "top_k": 2, "max_doc_chars": 30}, "bird sings")
    assert shown == "[1] Birds\nA bird sings."
    shown = search({"dataset": str(collection), "top_k": 2, "max_doc_chars": 30}, "dog")
    assert shown == "[1] Dogs\nA dog barks at the cat. A dog ..."
    assert search({"dataset": str(collection)}, "zebra") == "no documents match 'zebra'"


def test_the_index_is_built_once_per_file_and_rebuilt_when_it_changes(collection):
    from trainers.rollout.environments.tools import search as module

    params = {"dataset": str(collection)}
    search(params, "cat")
    built = [key for key in module._INDEXES if key[0] == str(collection.resolve())]
    search(params, "dog")
    assert [key for key in module._INDEXES if key[0] == str(collection.resolve())] == built
    collection.write_text(json.dumps({"title": "Zebras", "text": "zebra"}) + "\n")
    assert search(params, "zebra") == "[1] Zebras\nzebra"


def test_a_missing_collection_or_field_is_a_clear_error(tmp_path, collection):
    with pytest.raises(ToolError, match="cannot be read"):
        search({"dataset": str(tmp_path / "none.jsonl")}, "cat")
    with pytest.raises(ToolError, match="no text field 'body'"):
        search({"dataset": str(collection), "text_field": "body"}, "cat")


def test_building_an_index_never_loads_numba():
    # numba's llvmlite, once loaded, broke vLLM's kernel rebinding later in the same process
    # (a worker that ran a search episode could no longer start a vLLM engine).
    code = (
        "import json, sys\n"
        "from trainers.rollout.environments.tools.search import BM25, Document\n"
        "index = BM25([Document('a', 'the cat sat'), Document('b', 'a dog ran')])\n"
        "print(json.dumps([[doc for _, doc in index.search('cat', 1)], [m for m in ('numba', 'llvmlite') if m in sys.modules]]))"
    )
    root = Path(__file__).resolve().parents[5]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[0], []]
