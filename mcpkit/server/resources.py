"""Resources and resource templates: ``@mcpkit.resource``."""

from __future__ import annotations

import base64
import inspect
import re
import urllib.parse
from typing import Any, Callable, Iterable

from ..protocol.types import BlobResourceContents, TextResourceContents
from .errors import DefinitionError

_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ResourceDef:
    """A fixed resource (plain URI) or a template (URI with ``{var}`` parts)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        listed: bool = True,
        scopes: Iterable[str] | None = None,
    ) -> None:
        from .auth import normalize_scopes

        self.fn = fn
        self.uri = uri
        self.name = name or fn.__name__
        self.title = title
        self.description = description if description is not None else (inspect.getdoc(fn) or None)
        self.mime_type = mime_type
        self.size = size
        self.listed = listed
        self.scopes = normalize_scopes(scopes, f"resource {uri}")
        self.is_async = inspect.iscoroutinefunction(fn)
        self.variables = _VAR.findall(uri)
        self.is_template = bool(self.variables)
        _check_parameters(fn, uri, self.variables)
        self._pattern = _compile(uri) if self.is_template else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<mcpkit resource {self.uri!r}>"

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables of ``uri`` if it matches (values percent-decoded)."""
        if self._pattern is None:
            return {} if uri == self.uri else None
        m = self._pattern.fullmatch(uri)
        if m is None:
            return None
        return {k: urllib.parse.unquote(v) for k, v in m.groupdict().items()}

    def describe(self, *, titles: bool) -> dict[str, Any]:
        key = "uriTemplate" if self.is_template else "uri"
        out: dict[str, Any] = {key: self.uri, "name": self.name}
        if titles and self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.size is not None and not self.is_template:
            out["size"] = self.size
        return out

    def to_contents(self, uri: str, value: Any) -> list[Any]:
        """Turn what the reader returned into resource contents."""
        if isinstance(value, (TextResourceContents, BlobResourceContents)):
            return [value]
        if isinstance(value, list) and all(isinstance(v, (TextResourceContents, BlobResourceContents)) for v in value):
            return value
        mime = self.mime_type
        if isinstance(value, bytes):
            return [BlobResourceContents(uri=uri, blob=base64.b64encode(value).decode(), mimeType=mime or "application/octet-stream")]
        if isinstance(value, str):
            return [TextResourceContents(uri=uri, text=value, mimeType=mime or "text/plain")]
        raise TypeError(f"resource reader for {self.uri} returned {type(value).__name__}; expected str or bytes")


def _check_parameters(fn: Callable[..., Any], uri: str, variables: list[str]) -> None:
    """The reader is called with the template's variables as keyword arguments: each variable
    must be a parameter, and each parameter without a default must be a variable."""
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    where = f"resource {uri!r} ({getattr(fn, '__qualname__', fn)})"
    for var in variables:
        if var not in params and not takes_any:
            raise DefinitionError(f"{where}: the URI variable {{{var}}} is not a parameter of the function "
                                  f"(its parameters: {', '.join(params) or 'none'})")
    for name, p in params.items():
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if name not in variables and p.default is p.empty:
            hint = f"add {{{name}}} to the URI template" if variables else f"make the URI a template with {{{name}}}"
            raise DefinitionError(f"{where}: parameter {name!r} is not a variable of the URI; {hint} or give it a default")


def _compile(template: str) -> re.Pattern[str]:
    """Each ``{var}`` matches one segment, except the last one, which takes the rest."""
    parts = _VAR.split(template)
    pattern = ""
    names = parts[1::2]
    for i, literal in enumerate(parts[0::2]):
        pattern += re.escape(literal)
        if i < len(names):
            last = i == len(names) - 1 and not parts[2 * i + 2]
            pattern += f"(?P<{names[i]}>{'.+' if last else '[^/]+'})"
    return re.compile(pattern)


def resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    listed: bool = True,
    scopes: Iterable[str] | None = None,
) -> Callable[[Callable[..., Any]], ResourceDef]:
    """Declare a resource reader. A URI with ``{var}`` parts makes a template whose variables
    are passed as keyword arguments. Return ``str`` (text) or ``bytes`` (blob). ``scopes``: the
    OAuth scopes a caller needs to see and read it (authorized HTTP only)."""

    def wrap(fn: Callable[..., Any]) -> ResourceDef:
        return ResourceDef(fn, uri, name=name, title=title, description=description,
                           mime_type=mime_type, size=size, listed=listed, scopes=scopes)

    return wrap
