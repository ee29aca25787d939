"""Static word vectors: a second, meaning-based signal for the default ranking, in plain Python.

``data/word-vectors.bin`` (built by ``eval/build_word_vectors.py`` from the hybrid mode's
sentence model) gives each of ~21,000 English words a 128-d direction. A text's vector is the
normalised sum of its words' vectors; a word the file does not list is composed from its
WordPiece pieces (``logout`` = log + out) unless its singular is listed. The cosine of a query's and an operation's vectors
re-orders the lexical candidates: "folder" meets "directory", "reboot" meets "restart",
where no synonym list says so.

The file loads on the first query (about 10 ms), and an operation's vector is computed the
first time it is a candidate and kept, so start-up is unchanged and a query costs a few
hundred microseconds more.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterable
from importlib import resources
from operator import mul

from .text import STOP_WORDS, words
from .wordpiece import WordPiece

MAGIC = b"MKWV1\n"
DATA = "data/word-vectors.bin"
CACHE_WORDS = 50_000  # word -> vector kept (512 bytes each); later words are recomputed


class WordVectors:
    """Unit word vectors by word, from the bundled file's layout (see the build script)."""

    def __init__(self, blob: bytes) -> None:
        if not blob.startswith(MAGIC):
            raise ValueError("not a word-vector file")
        end = blob.index(b"\n", len(MAGIC))
        dims, count, names_len = (int(x) for x in blob[len(MAGIC):end].split())
        start = end + 1
        names = blob[start:start + names_len].decode("utf-8").split("\n")
        if len(names) != count or len(blob) != start + names_len + count * dims:
            raise ValueError("truncated word-vector file")
        self.dims = dims
        self.index = {name: i for i, name in enumerate(names)}
        self._rows = memoryview(blob)[start + names_len:]
        self._cache: dict[str, array | None] = {}
        self._pieces: WordPiece | None = None  # loaded for the first unlisted word

    @classmethod
    def bundled(cls) -> WordVectors:
        return cls(resources.files(__package__).joinpath(DATA).read_bytes())

    def _row(self, i: int) -> array:
        raw = array("b")
        raw.frombytes(self._rows[i * self.dims:(i + 1) * self.dims])
        return _unit(raw) or array("f", bytes(4 * self.dims))

    def word(self, word: str) -> array | None:
        """The unit vector of a lower-case word, composed from its pieces if it is not listed."""
        if word in self._cache:
            return self._cache[word]
        i = next((self.index[w] for w in (word, *_singulars(word)) if w in self.index), None)
        if i is not None:
            vec: array | None = self._row(i)
        else:
            pieces = self._pieces
            if pieces is None:  # searches run in worker threads: publish it whole, in one step
                pieces = self._pieces = WordPiece.bundled()
            rows = [self.index[t] for t in (pieces.vocab[n].removeprefix("##")
                                             for n in pieces.word_ids(word)) if t in self.index]
            vec = _unit(map(sum, zip(*(self._row(r) for r in rows)))) if rows else None
        if len(self._cache) < CACHE_WORDS:
            self._cache[word] = vec
        return vec

    def text(self, text: str) -> array | None:
        """The unit vector of a text (its content words summed), or None if it has none."""
        vecs = [v for v in (self.word(w) for w in words(text)
                            if len(w) > 1 and not w.isdigit() and w not in STOP_WORDS) if v is not None]
        if not vecs:
            return None
        return vecs[0] if len(vecs) == 1 else _unit(map(sum, zip(*vecs)))


def _singulars(word: str) -> tuple[str, ...]:
    """Spellings to try for an unlisted plural, in order (directories -> directory, boxes -> box,
    webhooks -> webhook)."""
    if not word.endswith("s") or word.endswith("ss"):
        return ()
    return (word[:-3] + "y", word[:-2], word[:-1]) if word.endswith("ies") else (word[:-2], word[:-1])


def cosine(a: array, b: array) -> float:
    """Cosine of two unit vectors."""
    return sum(map(mul, a, b))


def _unit(values: Iterable[float]) -> array | None:
    v = array("f", values)
    norm = math.sqrt(sum(map(mul, v, v)))
    return array("f", [x / norm for x in v]) if norm > 0 else None


_lock = threading.Lock()
_shared: WordVectors | None = None


def shared() -> WordVectors:
    """The bundled vectors, loaded once per process on first use (thread-safe)."""
    global _shared
    if _shared is None:
        with _lock:
            if _shared is None:
                _shared = WordVectors.bundled()
    return _shared
