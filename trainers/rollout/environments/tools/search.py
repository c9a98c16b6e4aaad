"""search: BM25 over a document collection uploaded as a dataset; no network.

The index is built once per (file, its modification time, fields) in each process and shared
by every episode: episodes only read it. Scores are Okapi BM25 with Lucene's idf,

    idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))
    score(q, d) = sum over query terms t of  idf(t) * f(t,d) * (k1 + 1) / (f(t,d) + k1 * (1 - b + b * |d| / avgdl))

(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009), on
lower-cased word tokens. A repeated query term counts once per occurrence, as in Lucene.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

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


class BM25:
    """An inverted index over `documents`; `search` returns (score, index) pairs, best first."""

    def __init__(self, documents: list[Document], k1: float = 1.5, b: float = 0.75) -> None:
        self.documents = documents
        self.k1, self.b = k1, b
        self.postings: dict[str, list[tuple[int, int]]] = {}  # term -> [(doc, term frequency)]
        self.lengths: list[int] = []
        for i, doc in enumerate(documents):
            terms = tokenize(f"{doc.title} {doc.text}")
            self.lengths.append(len(terms))
            for term, count in Counter(terms).items():
                self.postings.setdefault(term, []).append((i, count))
        self.avgdl = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0

    def idf(self, term: str) -> float:
        n = len(self.postings.get(term, ()))
        big_n = len(self.documents)
        return math.log(1 + (big_n - n + 0.5) / (n + 0.5))

    def scores(self, query: str) -> dict[int, float]:
        out: dict[int, float] = {}
        for term in tokenize(query):
            idf = self.idf(term)
            for doc, tf in self.postings.get(term, ()):
                norm = self.k1 * (1 - self.b + self.b * self.lengths[doc] / self.avgdl)
                out[doc] = out.get(doc, 0.0) + idf * tf * (self.k1 + 1) / (tf + norm)
        return out

    def search(self, query: str, top_k: int) -> list[tuple[float, int]]:
        ranked = sorted(((s, d) for d, s in self.scores(query).items()), key=lambda p: (-p[0], p[1]))
        return ranked[:top_k]


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
