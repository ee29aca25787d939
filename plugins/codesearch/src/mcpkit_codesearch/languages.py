"""Guess a programming language from a file name."""

import os.path

_BY_EXTENSION: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyx": "cython", ".pxd": "cython",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".hxx": "cpp", ".m": "objective-c", ".mm": "objective-cpp",
    ".rs": "rust", ".go": "go", ".java": "java", ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".swift": "swift", ".cs": "csharp", ".fs": "fsharp",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".vue": "vue", ".svelte": "svelte",
    ".rb": "ruby", ".php": "php", ".pl": "perl", ".pm": "perl", ".lua": "lua",
    ".r": "r", ".jl": "julia", ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".clj": "clojure",
    ".dart": "dart", ".zig": "zig", ".nim": "nim", ".sql": "sql",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "fish", ".ps1": "powershell",
    ".bat": "batch", ".cmd": "batch", ".html": "html", ".htm": "html", ".xml": "xml",
    ".css": "css", ".scss": "scss", ".sass": "sass", ".less": "less",
    ".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".ini": "ini",
    ".cfg": "ini", ".md": "markdown", ".rst": "restructuredtext", ".txt": "text",
    ".tex": "latex", ".proto": "protobuf", ".graphql": "graphql", ".tf": "terraform",
    ".cmake": "cmake", ".mk": "make", ".asm": "assembly", ".s": "assembly",
}

_BY_NAME: dict[str, str] = {
    "makefile": "make", "gnumakefile": "make", "dockerfile": "dockerfile",
    "cmakelists.txt": "cmake", "gemfile": "ruby", "rakefile": "ruby",
    "build": "starlark", "workspace": "starlark", "justfile": "just",
}


def guess_language(path: str) -> str | None:
    """Return a lower-case language name for `path`, or None when unknown."""
    name = os.path.basename(path).lower()
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name.startswith("dockerfile."):
        return "dockerfile"
    return _BY_EXTENSION.get(os.path.splitext(name)[1])
