"""mcpkit-openapi: find which operation of an OpenAPI / Swagger API does a task.

``search_ids`` ranks operations for a natural-language query, ``get_operation`` describes one.
The engine (``catalog``, ``spec``, ``refs``, ``lexical``, ``ranking``, ``embed``, ``engine``) is
plain Python; ``plugin`` is the mcpkit entry point.
"""

__version__ = "0.1.0"
