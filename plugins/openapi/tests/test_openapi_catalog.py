from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

import pytest

from mcpkit_openapi.catalog import SpecSource, build_catalog, parse_sources
from mcpkit_openapi.spec import MAX_SPEC_BYTES


def test_parse_sources_forms(tmp_path: Path) -> None:
    assert parse_sources(None) == []
    assert parse_sources("a.json", base=tmp_path) == [SpecSource(tmp_path / "a.json")]
    got = parse_sources(["a.json", {"path": "/abs/b.yaml", "name": "My API"}], base=tmp_path)
    assert got == [SpecSource(tmp_path / "a.json"), SpecSource(Path("/abs/b.yaml"), "my-api")]
    assert parse_sources({"gh": "g.json"}, base=tmp_path) == [SpecSource(tmp_path / "g.json", "gh")]
    for bad in (3, [""], [{"name": "x"}], [{"path": "a", "name": "!!"}]):
        with pytest.raises(ValueError):
            parse_sources(bad)


def test_relative_paths_use_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_sources(["specs/x.json"]) == [SpecSource(tmp_path / "specs" / "x.json")]


def test_single_spec_ids_are_not_prefixed(fixtures: Path) -> None:
    cat = build_catalog([SpecSource(fixtures / "petstore-3.0.yaml")])
    assert "listPets" in cat.by_id and cat.apis[0].name == "pet-store"
    assert not cat.embedded_default and not cat.errors


def test_several_specs_prefix_ids_and_bad_ones_are_skipped(fixtures: Path, caplog: pytest.LogCaptureFixture) -> None:
    sources = [
        SpecSource(fixtures / "petstore-3.0.yaml"),
        SpecSource(fixtures / "shop-swagger-2.0.json", "shop"),
        SpecSource(fixtures / "library-3.1.json"),
        SpecSource(fixtures / "broken.json"),
        SpecSource(fixtures / "not-a-spec.yaml"),
        SpecSource(fixtures / "missing.json"),
    ]
    with caplog.at_level(logging.ERROR, logger="mcpkit_openapi"):
        cat = build_catalog(sources)
    assert [a.name for a in cat.apis] == ["pet-store", "shop", "library-api"]
    assert "pet-store:listPets" in cat.by_id and "shop:placeOrder" in cat.by_id
    assert "pet-store:POST /pets" in cat.by_id
    assert len(cat.errors) == 3
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for name in ("broken.json", "not-a-spec.yaml", "missing.json"):
        assert name in logged


def test_duplicate_api_names_get_suffixes(fixtures: Path) -> None:
    cat = build_catalog([SpecSource(fixtures / "petstore-3.0.yaml")] * 2)
    assert [a.name for a in cat.apis] == ["pet-store", "pet-store-2"]
    assert "pet-store-2:listPets" in cat.by_id


def test_embedded_default_when_no_specs() -> None:
    cat = build_catalog([])
    assert cat.embedded_default and cat.apis[0].name == "demo"
    assert 18 <= len(cat.operations) <= 30 and "transitionIssue" in cat.by_id


def test_cache_is_keyed_by_content_hash(fixtures: Path, tmp_path: Path) -> None:
    spec = tmp_path / "pets.yaml"
    shutil.copy(fixtures / "petstore-3.0.yaml", spec)
    cache = tmp_path / "cache"
    first = build_catalog([SpecSource(spec)], cache)
    entries = list(cache.glob("*.json"))
    assert len(entries) == 1 and entries[0].name.startswith(first.apis[0].sha256)
    again = build_catalog([SpecSource(spec)], cache)  # served from the cache
    assert [o.to_dict() for o in again.operations] == [o.to_dict() for o in first.operations]
    spec.write_text(spec.read_text().replace("List all pets", "List every pet"))
    changed = build_catalog([SpecSource(spec)], cache)
    assert changed.by_id["listPets"].summary == "List every pet"
    assert len(list(cache.glob("*.json"))) == 2
    entries[0].write_text("{not json")  # a corrupt entry is ignored, not fatal
    spec.write_text((fixtures / "petstore-3.0.yaml").read_text())
    assert build_catalog([SpecSource(spec)], cache).by_id["listPets"].summary == "List all pets"


def _build_with_deadline(sources: list[SpecSource], seconds: float = 10.0, **kw: object):
    """build_catalog in a thread, so a read that blocks (a FIFO) fails the test instead of hanging it."""
    out: list = []
    worker = threading.Thread(target=lambda: out.append(build_catalog(sources, **kw)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"build_catalog did not return within {seconds} s (blocked on a special file?)"
    return out[0]


def test_special_files_and_oversized_specs_are_refused(fixtures: Path, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)  # nobody ever writes to it: a blocking open would wait forever
    huge = tmp_path / "huge.json"
    with huge.open("wb") as fh:  # sparse: costs no disk, but its size is over the cap
        fh.truncate(MAX_SPEC_BYTES + 1)
    sources = [SpecSource(Path("/dev/zero")), SpecSource(fifo), SpecSource(tmp_path),
               SpecSource(huge), SpecSource(fixtures / "petstore-3.0.yaml")]
    with caplog.at_level(logging.ERROR, logger="mcpkit_openapi"):
        cat = _build_with_deadline(sources)
    assert [a.name for a in cat.apis] == ["pet-store"]  # the good spec is still served
    assert len(cat.errors) == 4
    assert "/dev/zero: is a character device, not a regular file" in cat.errors[0]
    assert "is a FIFO (named pipe), not a regular file" in cat.errors[1]
    assert "is a directory" in cat.errors[2]
    assert "64.0 MiB; the limit is 64 MiB" in cat.errors[3]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all("\n" not in line and "Traceback" not in line for line in lines)


def test_the_size_cap_is_a_setting(fixtures: Path, tmp_path: Path) -> None:
    from mcpkit_openapi.engine import Engine, Settings, SettingsError

    spec = fixtures / "shop-swagger-2.0.json"
    tiny = spec.stat().st_size / 1048576 / 2
    engine = Engine(Settings.from_config({"specs": [str(spec)], "max_spec_mb": tiny, "cache_dir": str(tmp_path)}))
    assert engine.catalog.embedded_default is False and engine.catalog.operations == []
    assert "the limit is" in engine.catalog.errors[0]
    for bad in (0, -1, "64", True, 10_000):
        with pytest.raises(SettingsError, match="max_spec_mb"):
            Settings.from_config({"max_spec_mb": bad})
