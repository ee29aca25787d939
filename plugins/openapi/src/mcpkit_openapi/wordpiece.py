"""The uncased BERT WordPiece tokenizer of all-MiniLM-L6-v2, in plain Python.

The vocabulary ships as ``data/minilm-vocab.txt``. The ``hybrid`` ranking mode feeds its ids
to the model (:mod:`embed`); the default mode uses its pieces to compose a vector for a word
the bundled word vectors do not list (:mod:`wordvec`). No dependency.
"""

from __future__ import annotations

import unicodedata
from importlib import resources

MAX_TOKENS = 128  # the model's input limit in the hybrid mode


class WordPiece:
    """The BERT uncased tokenizer: clean, lower-case, strip accents, split punctuation,
    then greedy longest-match WordPiece with ``##`` continuations."""

    def __init__(self, vocab: list[str], lowercase: bool = True) -> None:
        """``lowercase=False`` for a cased model's vocabulary (no lower-casing, accents kept)."""
        self.vocab = vocab  # id -> token
        self.lowercase = lowercase
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.unk = self.ids["[UNK]"]
        self.cls = self.ids["[CLS]"]
        self.sep = self.ids["[SEP]"]

    @classmethod
    def bundled(cls) -> WordPiece:
        text = resources.files(__package__).joinpath("data/minilm-vocab.txt").read_text("utf-8")
        return cls(text.splitlines())

    @staticmethod
    def _is_punct(ch: str) -> bool:
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(ch).startswith("P")

    @staticmethod
    def _is_cjk(cp: int) -> bool:
        return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
                or 0x2A700 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)

    def basic_tokens(self, text: str) -> list[str]:
        chars = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            if ch.isspace():
                chars.append(" ")
            elif self._is_cjk(cp):
                chars.append(f" {ch} ")
            else:
                chars.append(ch)
        text = "".join(chars)
        if self.lowercase:
            text = unicodedata.normalize("NFD", text.lower())
            text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
        out: list[str] = []
        for word in text.split():
            current = ""
            for ch in word:
                if self._is_punct(ch):
                    if current:
                        out.append(current)
                        current = ""
                    out.append(ch)
                else:
                    current += ch
            if current:
                out.append(current)
        return out

    def word_ids(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    found = self.ids[piece]
                    break
                end -= 1
            if found is None:
                return [self.unk]
            pieces.append(found)
            start = end
        return pieces

    def encode(self, text: str, max_tokens: int = MAX_TOKENS) -> list[int]:
        ids = [self.cls]
        for word in self.basic_tokens(text):
            ids.extend(self.word_ids(word))
            if len(ids) >= max_tokens - 1:
                ids = ids[: max_tokens - 1]
                break
        ids.append(self.sep)
        return ids
