"""Code search plugin for mcpkit: a trigram-indexed SQLite store of repositories.

The engine (`CodeSearch`) does not import mcpkit; `mcpkit_codesearch.plugin`
wires it into an mcpkit server.
"""

from .engine import DEFAULT_MAX_FILE_SIZE, CodeSearch, UserError
from .models import IndexResult, RecentFile, RecentFiles, RunStatus, SearchHit, SearchResult
from .query import QueryError
from .sources import SourceError
from .store import StoreError

__all__ = [
    "DEFAULT_MAX_FILE_SIZE", "CodeSearch", "IndexResult", "QueryError", "RecentFile",
    "RecentFiles", "RunStatus", "SearchHit", "SearchResult", "SourceError", "StoreError",
    "UserError",
]
__version__ = "0.1.0"
