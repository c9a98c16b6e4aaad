"""search: BM25 over a document collection uploaded as a dataset; no network.

The index is built once per (file, its modification time, fields) in each process and shared
by every episode: episodes only read it. Scores are Okapi BM25 with Lucene's idf,

    idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(q, d) = sum over query terms t of  idf(t) * f(t,d) * (k1 + 1) / (f(t,d) + k1 * (1 - b + b * |d| / avgdl))

(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009), on
lower-cased word tokens. A repeated query term counts once per occurrence, as in Lucene.

The index is `bm25s` (a sparse term x document matrix of precomputed scores, float32). On a
20 MB collection of 13,579 documents it answered a query in 0.19 ms against 18.5 ms for the
inverted index of Python tuples it replaces, and kept 62 MB against 117, for about the same build
time (bench/search_index.py, numbers in bench/README.md).
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.data.readers import DataError, RowError, iter_records
from trainers.rollout.environments.catalog import SearchParams
from trainers.rollout.environments.tools.base import TOOLS, FunctionTool, ToolError

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_CHARS = 1000


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Document:
    title: str
    text: str


def _bm25s() -> Any:
    """bm25s, imported on the first index a process builds (so importing the tools stays light),
    without numba: bm25s imports numba whenever it is installed (vLLM's CPU build installs it), and
    numba's llvmlite, once loaded, breaks vLLM's kernel rebinding later in the same process (vLLM
    0.32's triton_utils scan of sys.modules fails on an llvmlite object: a worker that ran a search
    episode could no longer start a vLLM engine). The index uses the numpy backend anyway."""
    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    blocked = "numba" not in sys.modules
    if blocked:
        sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` raises ImportError
    try:
        import bm25s  # deferred: see the docstring
    finally:
        if blocked:
            del sys.modules["numba"]
    return bm25s


class BM25:
    """The index of `documents` (title and text together); `search` returns (score, index) pairs,
    best first, ties to the earlier document.

    bm25s's "lucene" method stores idf(t) * f / (f + K), Lucene 8's form without the constant
    (k1 + 1); scores here multiply it back, so they are the formula above (same ranking)."""

    def __init__(self, documents: list[Document], k1: float = 1.5, b: float = 0.75) -> None:
        bm25s = _bm25s()
        self.documents = documents
        self.k1, self.b = k1, b
        # Token ids made here rather than by bm25s.tokenize, whose Python loop over every token took
        # half the build: the words `tokenize` gives a query, numbered in C by a defaultdict whose
        # factory is its own length (a new word gets the next id).
        numbering: defaultdict[str, int] = defaultdict()
        numbering.default_factory = numbering.__len__
        token_ids = [list(map(numbering.__getitem__, tokenize(f"{d.title} {d.text}"))) for d in documents]
        self._index: Any = None  # None when no document holds a word: nothing can match
        if numbering:
            self._index = bm25s.BM25(k1=k1, b=b, method="lucene", backend="numpy")
            self._index.index((token_ids, dict(numbering)), show_progress=False)

    def idf(self, term: str) -> float:
        n = 0
        if self._index is not None and (column := self._index.vocab_dict.get(term)) is not None:
            indptr = self._index.scores["indptr"]  # column `column` holds one entry per document with `term`
            n = int(indptr[column + 1] - indptr[column])
        big_n = len(self.documents)
        return math.log(1 + (big_n - n + 0.5) / (n + 0.5))

    def _all_scores(self, query: str) -> np.ndarray:
        """One score per document (0 where no query term occurs)."""
        if self._index is None:
            return np.zeros(len(self.documents), dtype=np.float32)
        terms = self._index.get_tokens_ids(tokenize(query))  # unknown terms dropped, repeats kept
        return self._index.get_scores_from_ids(terms) * (self.k1 + 1)

    def scores(self, query: str) -> dict[int, float]:
        """{document index: score} for the documents holding a query term."""
        all_scores = self._all_scores(query)
        return {int(d): float(all_scores[d]) for d in np.flatnonzero(all_scores)}

    def search(self, query: str, top_k: int) -> list[tuple[float, int]]:
        all_scores = self._all_scores(query)
        hits = np.flatnonzero(all_scores)
        if len(hits) > top_k:  # keep the top_k best and every document tied with the last of them
            kth = np.partition(all_scores[hits], len(hits) - top_k)[len(hits) - top_k]
            hits = hits[all_scores[hits] >= kth]
        order = np.lexsort((hits, -all_scores[hits]))[:top_k]  # best score first, then lower index
        return [(float(all_scores[d]), int(d)) for d in hits[order]]


_INDEXES: dict[tuple[Any, ...], BM25] = {}
_LOCK = threading.Lock()


def load_index(path: str, fmt: str, text_field: str, title_field: str) -> BM25:
    """The index of the collection at `path`, built on first use in this process (under a lock:
    episodes on several threads start at once) and rebuilt when the file changes."""
    try:
        key = (os.path.realpath(path), os.stat(path).st_mtime_ns, fmt, text_field, title_field)
    except OSError as exc:
        raise ToolError(f"the document collection cannot be read: {exc}") from None
    with _LOCK:
        if key not in _INDEXES:
            for stale in [k for k in _INDEXES if k[0] == key[0] and k[2:] == key[2:]]:
                del _INDEXES[stale]  # the file changed: its old index is never asked for again
            _INDEXES[key] = BM25(read_documents(path, fmt, text_field, title_field))
        return _INDEXES[key]


def read_documents(path: str, fmt: str, text_field: str, title_field: str) -> list[Document]:
    documents = []
    try:
        for row, record in iter_records(path, fmt):
            if isinstance(record, RowError):
                raise record
            if not isinstance(record.get(text_field), str):
                raise DataError(f"row {row}: no text field {text_field!r}")
            title = record.get(title_field) if title_field else ""
            documents.append(Document(title=str(title or ""), text=record[text_field]))
    except DataError as exc:
        raise ToolError(f"the document collection cannot be read: {exc}") from None
    return documents


@TOOLS.register("search")
class Search(FunctionTool):
    params_model = SearchParams
    params: SearchParams
    name = SearchParams.offers
    description = "Search the document collection; returns the best matching documents."
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for."}},
        "required": ["query"],
    }

    def run(self, arguments: dict[str, Any]) -> str:
        query = arguments["query"][:MAX_QUERY_CHARS]
        p = self.params
        index = load_index(p.dataset, p.format, p.text_field, p.title_field)
        hits = index.search(query, p.top_k)
        if not hits:
            return f"no documents match {query!r}"
        return "\n\n".join(self._show(rank, index.documents[doc]) for rank, (_, doc) in enumerate(hits, 1))

    def _show(self, rank: int, doc: Document) -> str:
        text = doc.text if len(doc.text) <= self.params.max_doc_chars else doc.text[: self.params.max_doc_chars] + "..."
        return f"[{rank}] {doc.title}\n{text}" if doc.title else f"[{rank}] {text}"
