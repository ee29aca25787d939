"""Build ``mcpkit_openapi/data/word-vectors.bin``: static word vectors for the default ranking.

Each whole word of the model's WordPiece vocabulary (lower-case letters, three or more) is
embedded on its own by all-MiniLM-L6-v2, the model of the ``hybrid`` mode. The vectors are
centred (the mean vector of single words says "this is one word", not what it means),
projected onto their first ``DIMS`` principal components and stored as int8, one row per
word. Only the direction of a row matters: :mod:`mcpkit_openapi.wordvec` normalises rows on
load, so no scale is stored.

No API description and no query is read: the vocabulary is the model's own, so the file
carries general English knowledge (``folder`` ~ ``directory``, ``mute`` ~ ``silence``),
nothing learned from the evaluation sets. Words it lacks ("delete", "webhook") are composed
from their WordPiece pieces at run time. (Adding the words of the dev specs was tried and
measured worse on the dev sets: 0.800 against 0.815 mean recall@5.)

Needs the ``embeddings`` extra; the output is committed, so a default install never runs
this (rebuilding gives the same bytes)::

    python plugins/openapi/eval/build_word_vectors.py [--dims 128]

File layout: ``MKWV1\\n``, then ``<dims> <count> <words bytes>\\n``, then the words (UTF-8,
newline-separated), then ``count * dims`` signed bytes.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from mcpkit_openapi.wordvec import DATA, MAGIC

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "src" / "mcpkit_openapi" / DATA
WORD = re.compile(r"[a-z]{3,}")


def build(dims: int) -> bytes:
    import numpy as np

    from mcpkit_openapi.embed import Encoder
    from mcpkit_openapi.wordpiece import WordPiece

    vocab = list(WordPiece.bundled().ids)
    words = [w for w in vocab if WORD.fullmatch(w)]
    t0 = time.perf_counter()
    matrix = Encoder().encode(words).astype(np.float64)
    print(f"embedded {len(words)} words in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    matrix -= matrix.mean(axis=0)
    _, _, vt = np.linalg.svd(matrix, full_matrices=False)
    basis = vt[:dims]
    # a principal axis has no sign of its own: fix it so that rebuilding gives the same file
    basis *= np.where(basis[np.arange(dims), np.abs(basis).argmax(axis=1)] < 0, -1.0, 1.0)[:, None]
    projected = matrix @ basis.T
    scale = np.abs(projected).max(axis=1, keepdims=True) / 127.0
    quantised = np.round(projected / np.maximum(scale, 1e-12)).astype(np.int8)
    names = "\n".join(words).encode("utf-8")
    header = f"{dims} {len(words)} {len(names)}\n".encode()
    return MAGIC + header + names + quantised.tobytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    blob = build(args.dims)
    args.out.write_bytes(blob)
    print(f"wrote {args.out} ({len(blob) / 1e6:.2f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
