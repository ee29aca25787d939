"""The bundled static word vectors and the default mode's re-ordering by them."""

from __future__ import annotations

import pytest

from mcpkit_openapi import wordvec
from mcpkit_openapi.ranking import Searcher
from mcpkit_openapi.spec import Operation


@pytest.fixture(scope="module")
def vectors() -> wordvec.WordVectors:
    return wordvec.shared()


def test_the_bundled_file_loads_and_knows_english(vectors: wordvec.WordVectors) -> None:
    assert vectors.dims == 128 and len(vectors.index) > 20_000
    near = wordvec.cosine(vectors.text("folder"), vectors.text("directory"))
    far = wordvec.cosine(vectors.text("folder"), vectors.text("pizza"))
    assert near > 0.5 > far + 0.3
    assert wordvec.cosine(vectors.text("mute"), vectors.text("silence")) > 0.5


def test_unlisted_words_are_composed_or_singularised(vectors: wordvec.WordVectors) -> None:
    assert "delete" not in vectors.index and "webhook" not in vectors.index
    assert vectors.word("delete") is not None  # from its WordPiece pieces
    assert "milestones" not in vectors.index
    assert vectors.word("milestones") == vectors.word("milestone")  # its listed singular
    assert "directories" not in vectors.index
    assert vectors.word("directories") == vectors.word("directory")  # -ies -> -y
    assert vectors.text("the of and 42") is None  # nothing but stop words and numbers
    unit = vectors.text("close the pull request")
    assert unit is not None and wordvec.cosine(unit, unit) == pytest.approx(1.0, abs=1e-4)


def test_a_damaged_file_is_refused() -> None:
    good = (wordvec.resources.files(wordvec.__package__) / wordvec.DATA).read_bytes()
    assert wordvec.WordVectors(good).dims == 128
    with pytest.raises(ValueError):
        wordvec.WordVectors(good[:-1])
    with pytest.raises(ValueError):
        wordvec.WordVectors(b"PK\x03\x04" + good[4:])


def test_word_vectors_order_lexical_ties_by_meaning() -> None:
    ops = [
        Operation("listPizzas", "GET", "/pizzas", summary="List pizzas"),
        Operation("listDirectories", "GET", "/directories", summary="List directories"),
    ]
    query = "list my folders"
    plain = Searcher(ops, word_vectors=False).search(query, 2)
    assert plain[0][1] == plain[1][1]  # BM25F sees only "list": a tie, broken by position
    ranked = Searcher(ops).search(query, 2)
    assert [doc for doc, _ in ranked] == [1, 0]
    assert all(0.0 <= score <= 1.0 for _, score in ranked)


def test_word_vectors_never_add_candidates() -> None:
    """They re-order what BM25F found; an operation sharing no word with the query stays out."""
    ops = [Operation("listDirectories", "GET", "/directories", summary="List directories"),
           Operation("getPizza", "GET", "/pizzas/{id}", summary="Get a pizza")]
    assert Searcher(ops).search("folder", 5) == []


def test_threads_composing_unlisted_words_at_once_get_the_right_vectors() -> None:
    """search_ids runs in worker threads: the first unlisted words may be composed by several
    at once, while the tokenizer is still loading (this failed before it was published whole)."""
    import sys

    words = [f"zqx{i}webhookery" for i in range(100)] + ["logout", "webhooks", "unmute"]
    expected = [wordvec.WordVectors.bundled().word(w) for w in words]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over often, so the threads really interleave
    try:
        _compose_in_threads(words, expected)
    finally:
        sys.setswitchinterval(switch)


def _compose_in_threads(words: list[str], expected: list) -> None:
    import threading

    for _ in range(10):
        vectors = wordvec.WordVectors.bundled()
        got: list[list] = [[] for _ in range(8)]
        threads = [threading.Thread(target=lambda out: out.extend(vectors.word(w) for w in words), args=(got[k],))
                   for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(out == expected for out in got)
