"""Authorization for the HTTP transports: the resource server and the bundled verifiers
(``jwt``, ``introspection``, ``static``). See docs/auth.md."""

from .resource_server import PRM_PATH, ResourceServer

__all__ = ["PRM_PATH", "ResourceServer"]
