"""JSON-RPC 2.0 framing with msgspec: decode once, encode once."""

from __future__ import annotations

import itertools
import re
from typing import Any, Union

import msgspec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: implementation-defined server errors: too many requests in flight on one connection; a
#: request (other than a tool call, which answers isError) ran past its deadline
SERVER_BUSY = -32000
REQUEST_TIMEOUT = -32001
#: a handshake-era ``initialize`` found every session slot busy (HTTP 503 with Retry-After)
TOO_MANY_SESSIONS = -32010
# MCP-defined codes (2026-07-28 numbering)
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
# Handshake-era resource-not-found (replaced by -32602 in 2026-07-28)
RESOURCE_NOT_FOUND_LEGACY = -32002

RequestId = Union[int, str]


class ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = msgspec.UNSET


class Message(msgspec.Struct, omit_defaults=True):
    """Any JSON-RPC message; which kind it is follows from the fields present.

    ``params`` and ``result`` stay raw so each method decodes them straight into its own type.
    """

    jsonrpc: str
    id: Union[int, str, None, msgspec.UnsetType] = msgspec.UNSET
    method: Union[str, msgspec.UnsetType] = msgspec.UNSET
    params: Union[msgspec.Raw, msgspec.UnsetType] = msgspec.UNSET
    result: Union[msgspec.Raw, msgspec.UnsetType] = msgspec.UNSET
    error: Union[ErrorObject, msgspec.UnsetType] = msgspec.UNSET

    @property
    def is_request(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is not msgspec.UNSET

    @property
    def is_notification(self) -> bool:
        return self.method is not msgspec.UNSET and self.id is msgspec.UNSET

    @property
    def is_response(self) -> bool:
        return self.method is msgspec.UNSET and (
            self.result is not msgspec.UNSET or self.error is not msgspec.UNSET
        )


#: how many characters of a value the client sent an error message echoes back
ECHO_LIMIT = 200


def clip(value: str, limit: int = ECHO_LIMIT) -> str:
    """``value`` fit to echo in an error: at most ``limit`` characters, then a marker saying how
    many were left out (a 3 MiB URI must not come back in full)."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…[{len(value) - limit} more characters]"


class ProtocolError(Exception):
    """A JSON-RPC error to send back; its text is written for the client, never a traceback."""

    def __init__(self, code: int, message: str, data: Any = msgspec.UNSET) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_object(self) -> ErrorObject:
        return ErrorObject(self.code, self.message, self.data)


_single_decoder = msgspec.json.Decoder(Message)
_batch_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_encoder = msgspec.json.Encoder()


class Invalid(msgspec.Struct):
    """A frame that parsed as JSON but is not a valid JSON-RPC message."""

    id: RequestId | None
    reason: str


#: Deepest nesting of arrays and objects a message may have (the whole message counts, params
#: included). Deeper input is a parse error, found in linear time before anything decodes it.
MAX_DEPTH = 128
_NOT_JSON = "Parse error: the message is not valid JSON"
# A JSON string (escapes included), to be skipped when counting brackets.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET = bytes(range(256)).translate(None, b"[]{}")
_STEP = {ord("["): 1, ord("]"): -1}


def check_frame(data: bytes) -> None:
    """Refuse, as PARSE_ERROR, bytes that are not UTF-8 or nest deeper than MAX_DEPTH.

    Both checks are linear and cheap on ordinary frames: ASCII frames skip the UTF-8 pass,
    and a frame with fewer brackets than the limit cannot be too deep. After this, no part
    of the frame (params decoded later included) can fail on bad UTF-8 or exhaust the
    recursion limit.
    """
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(PARSE_ERROR, "Parse error: the message is not valid UTF-8") from None
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH and _nesting(data) > MAX_DEPTH:
        raise ProtocolError(PARSE_ERROR, f"Parse error: the message nests deeper than {MAX_DEPTH} levels")


def _nesting(data: bytes) -> int:
    """How deep arrays and objects nest in ``data`` (strings skipped), in C-speed passes."""
    # Without escaped quotes, every other piece between quotes is a string's content.
    outside = b"".join(data.split(b'"')[::2]) if b'\\"' not in data else _JSON_STRING.sub(b"", data)
    brackets = outside.translate(_SQUARE, _NOT_BRACKET)
    # Shallow frames (most of them) empty out in a few passes of removing innermost pairs;
    # each pass lowers the depth by one. The rest is counted exactly.
    for peeled in range(8):
        if not brackets:
            return peeled
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):
            break
        brackets = inner
    else:
        peeled = 8
    if not brackets:
        return peeled
    return peeled + max(itertools.accumulate(map(_STEP.__getitem__, brackets)))


def decode(data: bytes) -> Message | list[Message | Invalid] | Invalid:
    """Decode one frame: a message, a batch (list) or an Invalid marker.

    Raises ProtocolError(PARSE_ERROR) when the bytes are not JSON at all, not UTF-8, or nest
    deeper than MAX_DEPTH.
    """
    check_frame(data)
    try:
        return _check(_single_decoder.decode(data))
    except msgspec.DecodeError as exc:
        if not isinstance(exc, msgspec.ValidationError):
            raise ProtocolError(PARSE_ERROR, _NOT_JSON) from None
    except (RecursionError, UnicodeDecodeError):  # not reachable after check_frame; kept as a net
        raise ProtocolError(PARSE_ERROR, _NOT_JSON) from None
    # Valid JSON, not a single well-formed message: a batch, or an invalid request.
    try:
        if data.lstrip()[:1] == b"[":
            return [_decode_member(item) for item in _batch_decoder.decode(data)]
        return _invalid(data)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        raise ProtocolError(PARSE_ERROR, _NOT_JSON) from None


def _decode_member(raw: msgspec.Raw) -> Message | Invalid:
    try:
        return _check(_single_decoder.decode(raw))
    except msgspec.ValidationError:
        return _invalid(raw)


def _check(msg: Message) -> Message | Invalid:
    rid = None if msg.id is msgspec.UNSET else msg.id
    if msg.jsonrpc != "2.0":
        return Invalid(rid, 'jsonrpc must be "2.0"')
    if msg.method is not msgspec.UNSET:
        if msg.id is None:
            return Invalid(None, "request id must be a string or an integer, not null")
        return msg
    if msg.is_response and msg.id is not msgspec.UNSET:
        return msg
    return Invalid(rid, "not a request, notification or response")


class _IdOnly(msgspec.Struct):
    id: Any = None


def _invalid(raw: msgspec.Raw | bytes) -> Invalid:
    try:
        rid = msgspec.json.decode(raw, type=_IdOnly).id
    except msgspec.ValidationError:
        rid = None
    if not isinstance(rid, (int, str)) or isinstance(rid, bool):
        rid = None
    return Invalid(rid, "the message is not a valid JSON-RPC 2.0 request")


# --- encoding -------------------------------------------------------------------------------

class _Response(msgspec.Struct):
    jsonrpc: str
    id: Union[int, str]
    result: Any


class _ErrorResponse(msgspec.Struct):
    jsonrpc: str
    id: Union[int, str, None]
    error: ErrorObject


class _Notification(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: Any = msgspec.UNSET


class _Request(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: Union[int, str]
    method: str
    params: Any = msgspec.UNSET


def encode_result(request_id: RequestId, result: Any) -> bytes:
    return _encoder.encode(_Response("2.0", request_id, result))


def encode_error(request_id: RequestId | None, error: ProtocolError | ErrorObject) -> bytes:
    obj = error.to_object() if isinstance(error, ProtocolError) else error
    return _encoder.encode(_ErrorResponse("2.0", request_id, obj))


def encode_notification(method: str, params: Any = msgspec.UNSET) -> bytes:
    return _encoder.encode(_Notification("2.0", method, params))


def encode_request(request_id: RequestId, method: str, params: Any = msgspec.UNSET) -> bytes:
    return _encoder.encode(_Request("2.0", request_id, method, params))


def encode_batch(frames: list[bytes]) -> bytes:
    return b"[" + b",".join(frames) + b"]"


class Answer:
    """The answer to one request, kept typed until the transport's edge encodes it once: the
    HTTP status, a step-up challenge or a log line are read from it, not from bytes."""

    __slots__ = ("id", "result", "error")

    def __init__(self, request_id: RequestId | None, result: Any = None, error: ErrorObject | None = None) -> None:
        self.id = request_id
        self.result = result
        self.error = error

    @classmethod
    def failure(cls, request_id: RequestId | None, exc: ProtocolError) -> "Answer":
        return cls(request_id, None, exc.to_object())

    @property
    def code(self) -> int | None:
        """The error code, or None for a result."""
        return None if self.error is None else self.error.code

    def encode(self) -> bytes:
        if self.error is not None:
            return _encoder.encode(_ErrorResponse("2.0", self.id, self.error))
        return _encoder.encode(_Response("2.0", self.id, self.result))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Answer({self.id!r}, error={self.error!r})" if self.error is not None else f"Answer({self.id!r}, result)"


def to_plain(value: Any) -> Any:
    """A result as plain dicts, lists and scalars, as a client would decode it: structs, and
    parts kept as the bytes they came as (``msgspec.Raw``, a gateway's upstream result), too."""
    return msgspec.json.decode(_encoder.encode(value))


def decode_params(raw: msgspec.Raw | msgspec.UnsetType, type_: type[Any]) -> Any:
    """Decode a request's params into ``type_``; bad params become INVALID_PARAMS."""
    data = b"{}" if raw is msgspec.UNSET else raw
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.ValidationError as exc:
        raise ProtocolError(INVALID_PARAMS, f"Invalid params: {exc}") from None
    except msgspec.DecodeError:
        raise ProtocolError(INVALID_PARAMS, "Invalid params: not valid JSON") from None
