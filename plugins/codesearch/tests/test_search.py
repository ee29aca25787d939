"""Search semantics: equal to grep on a real tree, regexes, short terms, filters, errors."""

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from mcpkit_codesearch import CodeSearch, QueryError

from .conftest import write

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PACKAGES = ["json", "email", "http", "importlib", "logging", "xml", "asyncio"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CodeSearch]:
    """Some real Python packages copied from this interpreter's standard library."""
    base = tmp_path_factory.mktemp("grep")
    tree = base / "tree"
    for name in PACKAGES:
        shutil.copytree(STDLIB / name, tree / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    write(tree, "edge/no_final_newline.txt", "first\nsecond needle\nthird needle")
    write(tree, "edge/blank_lines.txt", "\n\nneedle after blanks\n\n")
    eng = CodeSearch(base / "db.sqlite3")
    eng.index(str(tree), project="std")
    yield tree, eng
    eng.close()


def _grep(tree: Path, term: str, *flags: str) -> list[tuple[str, int, str]]:
    proc = subprocess.run(["grep", "-rnF", *flags, "--", term], cwd=tree, capture_output=True,
                          env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert proc.returncode in (0, 1), proc.stderr
    out = []
    for raw in proc.stdout.decode("utf-8").splitlines():
        path, line, text = raw.split(":", 2)
        out.append((path, int(line), text))
    return sorted(out)


@pytest.mark.parametrize("term, flags", [
    ("import", ()), ("def __init__(self", ()), ("raise ValueError(", ()),
    ("needle", ()), ("self._", ()), ("json", ("-i",)), ("Message", ("-i",)),
    ("HTTP", ()), ("http", ("-i",)),
])
def test_matches_grep_line_for_line(corpus: tuple[Path, CodeSearch], term: str,
                                    flags: tuple[str, ...]) -> None:
    tree, eng = corpus
    expected = _grep(tree, term, *flags)
    assert expected, "the corpus should contain the term"
    found = eng.search(term, case_sensitive="-i" not in flags, limit=500, project="std")
    got = [(h.path, h.line, h.snippet) for h in found.results]
    assert found.total == len(expected)
    assert got == expected[:500]
    assert found.truncated == (len(expected) > 500)
    for hit in found.results:
        hay = hit.snippet if "-i" not in flags else hit.snippet.lower()
        assert hit.column == hay.find(term if "-i" not in flags else term.lower()) + 1


def test_regex_and_short_terms_match_grep(corpus: tuple[Path, CodeSearch]) -> None:
    tree, eng = corpus
    cases = [(r"^class \w+Error\(", r"^class [[:alnum:]_]*Error("),
             (r"def (get|set)_\w+\(self\)", r"def \(get\|set\)_[[:alnum:]_]*(self)")]
    for pattern, grep_pattern in cases:
        proc = subprocess.run(["grep", "-rn", "--", grep_pattern], cwd=tree, capture_output=True,
                              text=True)
        expected = sorted((p, int(n), t) for p, n, t in
                          (line.split(":", 2) for line in proc.stdout.splitlines()))
        found = eng.search(pattern, regex=True, case_sensitive=True, limit=500)
        assert expected and found.total == len(expected)
        assert [(h.path, h.line, h.snippet) for h in found.results] == expected[:500]
    short = eng.search("%=", case_sensitive=True, limit=500)
    assert short.total == len(_grep(tree, "%="))
    assert [(h.path, h.line) for h in short.results] == [
        (p, n) for p, n, _ in _grep(tree, "%=")][:500]


def test_line_numbers_and_context_at_file_edges(corpus: tuple[Path, CodeSearch]) -> None:
    _, eng = corpus
    hits = eng.search("needle", path="edge/*").results
    by_file = {(h.path, h.line): h for h in hits}
    last = by_file[("edge/no_final_newline.txt", 3)]
    assert last.snippet == "third needle" and last.context_after == []
    assert last.context_before == ["first", "second needle"]
    blank = by_file[("edge/blank_lines.txt", 3)]
    assert blank.context_before == ["", ""] and blank.context_after == [""]
    assert eng.search(r"^$", regex=True, path="edge/blank_lines.txt").total == 3


def test_path_filter_project_filter_and_limit(corpus: tuple[Path, CodeSearch]) -> None:
    _, eng = corpus
    decoder = eng.search("class JSONDecoder", path="json/*.py")
    assert [h.path for h in decoder.results] == ["json/decoder.py"]
    assert eng.search("class JSONDecoder", path="email/").total == 0
    assert eng.search("class JSONDecoder", path="decoder.py").total == 1  # base name
    assert eng.search("class JSONDecoder", path="json").total == 1  # directory
    limited = eng.search("import", limit=3)
    assert len(limited.results) == 3 and limited.truncated and limited.total > 3
    with pytest.raises(QueryError, match=r"unknown project 'nope'.*std"):
        eng.search("import", project="nope")


def test_bad_input_gives_clear_errors(corpus: tuple[Path, CodeSearch]) -> None:
    _, eng = corpus
    with pytest.raises(QueryError, match="invalid regular expression"):
        eng.search("(unclosed", regex=True)
    with pytest.raises(QueryError, match="1-500 characters"):
        eng.search("")
    with pytest.raises(QueryError, match="1-500 characters"):
        eng.search("x" * 501)
    with pytest.raises(QueryError, match="single line"):
        eng.search("a\nb")
    with pytest.raises(QueryError, match="limit"):
        eng.search("import", limit=0)


def test_special_characters_are_literal(engine: CodeSearch, tmp_path: Path) -> None:
    root = tmp_path / "special"
    write(root, "q.txt", 'say "hi" AND "bye"\nfoo*bar (x) [y]\nNEAR(a b)\n')
    write(root, "crlf.txt", "windows line\r\nsecond windows\r\n")
    engine.index(str(root))
    assert engine.search('"hi" AND "bye"').results[0].line == 1
    assert engine.search("foo*bar (x) [y]").results[0].column == 1
    assert engine.search("NEAR(a b)").total == 1
    crlf = engine.search("windows").results
    assert [(h.line, h.snippet) for h in crlf] == [(1, "windows line"), (2, "second windows")]
    assert engine.search(r"line$", regex=True).total == 0  # like grep: the \r is still there
    assert engine.search(r"line\r$", regex=True).total == 1


def test_recent_files_and_read_file(engine: CodeSearch, tmp_path: Path) -> None:
    root = tmp_path / "recent"
    write(root, "a.py", "print('a')\n")
    write(root, "lib/b.rs", "fn main() {}\n")
    write(root, "Makefile", "all:\n")
    engine.index(str(root))
    write(root, "c.ts", "export {}\n")
    engine.index(str(root))
    files = engine.recent_files(10).files
    assert files[0].path == "c.ts" and files[0].language == "typescript"
    assert {(f.path, f.language, f.size) for f in files} == {
        ("a.py", "python", 11), ("lib/b.rs", "rust", 13), ("Makefile", "make", 5),
        ("c.ts", "typescript", 10)}
    assert re.match(r"\d{4}-\d\d-\d\dT", files[0].indexed_at)
    assert len(engine.recent_files(2, "recent").files) == 2
    assert engine.read_file("recent", "lib/b.rs") == "fn main() {}\n"
    for bad in ("../recent/a.py", "lib/../a.py", "/etc/passwd", "missing.py", ""):
        assert engine.read_file("recent", bad) is None
    assert engine.read_file("other", "a.py") is None
