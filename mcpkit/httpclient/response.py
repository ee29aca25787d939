"""An HTTP answer: status, headers (built only when asked for), body, and JSON helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Mapping, TypeVar, overload

import msgspec

from .errors import HttpStatusError

if TYPE_CHECKING:
    from .connection import Connection

T = TypeVar("T")
_decode_json = msgspec.json.decode


class Headers(Mapping[str, str]):
    """Response headers, looked up without regard to case. A header sent several times reads
    as its values joined by ``", "``; ``get_list(name)`` gives them apart (``Set-Cookie``)."""

    __slots__ = ("raw", "_joined")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        joined: dict[str, str] = {}
        for name, value in raw:
            key, text = name.decode("latin-1").lower(), value.decode("latin-1")
            joined[key] = f"{joined[key]}, {text}" if key in joined else text
        self._joined = joined

    def __getitem__(self, name: str) -> str:
        return self._joined[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self._joined.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._joined

    def __iter__(self) -> Iterator[str]:
        return iter(self._joined)

    def __len__(self) -> int:
        return len(self._joined)

    def get_list(self, name: str) -> list[str]:
        key = name.lower().encode("latin-1")
        return [v.decode("latin-1") for n, v in self.raw if n.lower() == key]

    def __repr__(self) -> str:
        return f"Headers({self._joined!r})"


class HttpResponse:
    """One answer. ``content`` is the whole body (empty until read for a streamed answer)."""

    __slots__ = ("method", "url", "status_code", "reason_phrase", "_raw_headers", "_headers", "content", "_stream")

    def __init__(self, method: str, url: str, status_code: int, reason_phrase: str,
                 raw_headers: list[tuple[bytes, bytes]], content: bytes = b"") -> None:
        self.method = method
        self.url = url
        self.status_code = status_code
        self.reason_phrase = reason_phrase
        self._raw_headers = raw_headers
        self._headers: Headers | None = None
        self.content = content
        self._stream: "Connection | None" = None  # the connection a streamed body is read from

    @property
    def headers(self) -> Headers:
        if self._headers is None:
            self._headers = Headers(self._raw_headers)
        return self._headers

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def is_error(self) -> bool:
        return self.status_code >= 400

    @property
    def text(self) -> str:
        """The body as text, in the charset the Content-Type names (UTF-8 when it names none)."""
        charset = "utf-8"
        ctype = self.headers.get("content-type", "")
        for part in ctype.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                charset = value.strip('"')
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    @overload
    def json(self) -> Any: ...
    @overload
    def json(self, type: type[T]) -> T: ...
    def json(self, type: Any = None) -> Any:
        """The body decoded from JSON (msgspec); with ``type`` (a Struct, dataclass, TypedDict,
        ``list[int]``…) decoded into it and checked: a mismatch raises ``msgspec.ValidationError``."""
        if type is None:
            return _decode_json(self.content)
        return _decode_json(self.content, type=type)

    def raise_for_status(self) -> "HttpResponse":
        """``self`` for a 1xx–3xx answer; :class:`HttpStatusError` for a 4xx or 5xx."""
        if self.status_code >= 400:
            kind = "client error" if self.status_code < 500 else "server error"
            raise HttpStatusError(f"{kind} {self.status_code} {self.reason_phrase} for {self.method} {self.url}".replace("  ", " "),
                                  response=self)
        return self

    # -- streamed bodies (HttpClient.stream) --------------------------------------------------

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body piece by piece as it arrives (for ``HttpClient.stream``; a read answer
        yields its whole ``content`` once)."""
        conn = self._stream
        if conn is None:
            if self.content:
                yield self.content
            return
        while (chunk := await conn.next_chunk()) is not None:
            yield chunk

    async def aread(self) -> bytes:
        """Read the rest of a streamed body into ``content`` and return it."""
        if self._stream is not None:
            self.content = b"".join([chunk async for chunk in self.aiter_bytes()])
            self._stream = None
        return self.content

    def __repr__(self) -> str:
        return f"<HttpResponse [{self.status_code} {self.reason_phrase}] {self.method} {self.url}>"
