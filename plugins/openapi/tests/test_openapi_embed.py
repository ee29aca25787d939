"""The optional embedding extra (skipped when it is not installed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpkit_openapi.ranking import hybrid_available

pytestmark = pytest.mark.skipif(not hybrid_available(), reason="mcpkit-openapi[embeddings] is not installed")


def test_wordpiece_matches_bert_uncased() -> None:
    from mcpkit_openapi.wordpiece import WordPiece

    tok = WordPiece.bundled()
    assert tok.basic_tokens("Héllo, WORLD!") == ["hello", ",", "world", "!"]
    ids = tok.encode("unaffable issues")
    assert ids[0] == tok.cls and ids[-1] == tok.sep and len(ids) > 4  # split into word pieces
    assert len(tok.encode("word " * 500)) == 128


def test_similar_sentences_are_close() -> None:
    from mcpkit_openapi.embed import shared_encoder

    a, b, c = shared_encoder().encode(["close an issue", "resolve a ticket", "download a zip archive"])
    assert abs(float(a @ a) - 1.0) < 1e-3
    assert float(a @ b) > float(a @ c) + 0.15


def test_hybrid_engine_and_embedding_cache(tmp_path: Path) -> None:
    from mcpkit_openapi.engine import Engine, Settings

    engine = Engine(Settings.from_config({"ranking": "hybrid", "cache_dir": str(tmp_path)}))
    assert engine.searcher.semantic is not None  # nothing cached yet: embedded at start-up
    assert engine.search("move this issue to done", 3)[0].operation_id == "transitionIssue"
    hits = engine.search("erase a remark", 3)  # no shared word: the embedding finds it
    assert hits[0].operation_id == "deleteComment"
    assert all(0 <= h.similarity_score <= 1 for h in hits)
    assert list(tmp_path.glob("emb-*.npy"))
    again = Engine(Settings.from_config({"ranking": "hybrid", "cache_dir": str(tmp_path)}))
    assert again.searcher.semantic is None  # cached: the model waits for the first query
    assert [h.operation_id for h in again.search("erase a remark", 3)] == [h.operation_id for h in hits]
