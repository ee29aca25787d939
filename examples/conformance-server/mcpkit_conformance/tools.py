"""The conformance tools, in the order the harness expects."""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec
import trio

import mcpkit

# Fixture data (the same bytes the reference servers use): a 1x1 PNG and a tiny WAV.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_B64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

_CAPABILITY = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


# -- helpers ------------------------------------------------------------------------------------
def _form(ctx: mcpkit.Context, message: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """An ``elicitation/create`` request for ``request_input`` (form mode from 2025-11-25 on)."""
    params: dict[str, Any] = {"message": message, "requestedSchema": schema}
    if ctx.protocol_version >= "2025-11-25":
        params = {"mode": "form", **params}
    return ("elicitation/create", params)


def _sampling(text: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
    return ("sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens,
    })


async def _ask(ctx: mcpkit.Context, requests: dict[str, tuple[str, dict[str, Any]]], *, state: Any = None) -> dict[str, Any]:
    """``request_input``, refusing (-32021 in the stateless era) when the client did not declare
    the capabilities the requests need: a server must not rely on undeclared capabilities."""
    ctx.require_capability(*sorted({_CAPABILITY[method] for method, _ in requests.values()}))
    return await ctx.request_input(requests, state=state)


def _content(answer: Any) -> dict[str, Any]:
    """The ``content`` of an elicitation answer (empty unless accepted with an object)."""
    if isinstance(answer, dict) and answer.get("action") == "accept" and isinstance(answer.get("content"), dict):
        return answer["content"]
    return {}


def _sampled_text(result: Any) -> str:
    """The text of a CreateMessageResult (``content`` is one block or, from 2025-11-25, a list)."""
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list):
        content = next((c for c in content if isinstance(c, dict) and c.get("type") == "text"), None)
    if isinstance(content, dict):
        return str(content.get("text", ""))
    return ""


def _elicitation_summary(answer: dict[str, Any]) -> str:
    return f"Elicitation completed: action={answer.get('action')}, content={json.dumps(answer.get('content') or {})}"


# -- tools (listed in this order; test_simple_text must be first) -------------------------------
@mcpkit.tool
async def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@mcpkit.tool
async def test_image_content() -> mcpkit.ImageContent:
    """Tests image content response."""
    return mcpkit.ImageContent(data=PNG_B64, mimeType="image/png")


@mcpkit.tool
async def test_audio_content() -> mcpkit.AudioContent:
    """Tests audio content response."""
    return mcpkit.AudioContent(data=WAV_B64, mimeType="audio/wav")


@mcpkit.tool
async def test_embedded_resource() -> mcpkit.EmbeddedResource:
    """Tests embedded resource content response."""
    return mcpkit.EmbeddedResource(resource=mcpkit.TextResourceContents(
        uri="test://embedded-resource", mimeType="text/plain", text="This is an embedded resource content.",
    ))


@mcpkit.tool
async def test_multiple_content_types() -> mcpkit.ToolResult:
    """Tests response with multiple content types (text, image, resource)."""
    return mcpkit.ToolResult(content=[
        mcpkit.TextContent(text="Multiple content types test:"),
        mcpkit.ImageContent(data=PNG_B64, mimeType="image/png"),
        mcpkit.EmbeddedResource(resource=mcpkit.TextResourceContents(
            uri="test://mixed-content-resource", mimeType="application/json", text='{"test":"data","value":123}',
        )),
    ])


@mcpkit.tool
async def test_tool_with_logging(ctx: mcpkit.Context) -> str:
    """Tests tool that emits log messages during execution."""
    await ctx.log("info", "Tool execution started")
    await trio.sleep(0.05)
    await ctx.log("info", "Tool processing data")
    await trio.sleep(0.05)
    await ctx.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


@mcpkit.tool
async def test_tool_with_progress(ctx: mcpkit.Context) -> str:
    """Tests tool that reports progress notifications."""
    await ctx.report_progress(0, 100, "Completed step 0 of 100")
    await trio.sleep(0.05)
    await ctx.report_progress(50, 100, "Completed step 50 of 100")
    await trio.sleep(0.05)
    await ctx.report_progress(100, 100, "Completed step 100 of 100")
    return f"Progress test completed (token: {ctx.progress_token})"


@mcpkit.tool
async def test_sampling(
    prompt: Annotated[str, msgspec.Meta(description="The prompt to send to the LLM")],
    ctx: mcpkit.Context,
) -> str:
    """Tests server-initiated sampling (LLM completion request)."""
    result = await ctx.sample(prompt, max_tokens=100, key="sampling")
    return f"LLM response: {_sampled_text(result)}"


_USER_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}


@mcpkit.tool
async def test_elicitation(
    message: Annotated[str, msgspec.Meta(description="The message to show the user")],
    ctx: mcpkit.Context,
) -> str:
    """Tests server-initiated elicitation (user input request)."""
    answer = await ctx.elicit(message, _USER_SCHEMA, key="elicitation")
    return f"User response: action={answer.get('action')}, content={json.dumps(answer.get('content') or {})}"


_SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}


@mcpkit.tool
async def test_elicitation_sep1034_defaults(ctx: mcpkit.Context) -> str:
    """Tests elicitation with default values for all primitive types (SEP-1034)."""
    answer = await ctx.elicit("Please review and update the form fields with defaults", _SEP1034_SCHEMA, key="elicitation")
    return _elicitation_summary(answer)


_SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]},
        },
    },
}


@mcpkit.tool
async def test_elicitation_sep1330_enums(ctx: mcpkit.Context) -> str:
    """Tests elicitation with the enum schema variants of SEP-1330."""
    answer = await ctx.elicit("Please select options from the enum fields", _SEP1330_SCHEMA, key="elicitation")
    return _elicitation_summary(answer)


@mcpkit.tool
async def test_error_handling() -> str:
    """Tests error response handling (always returns an isError result)."""
    raise mcpkit.ToolError("This tool intentionally returns an error for testing")


_X_MCP_HEADER_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "description": "Region to act on (mirrored in the Mcp-Param-Region header)", "x-mcp-header": "Region"},
    },
}


@mcpkit.tool(input_schema=_X_MCP_HEADER_SCHEMA)
async def test_x_mcp_header(region: str | None = None) -> str:
    """Tests an argument mirrored into an HTTP header (x-mcp-header, SEP-2243)."""
    return f"Region: {region}"


@mcpkit.tool
async def test_missing_capability(ctx: mcpkit.Context) -> str:
    """Needs the client's sampling capability; fails with -32021 when it was not declared."""
    ctx.require_capability("sampling")
    return "The client declared the sampling capability."


# SEP-2322 multi round-trip requests (stateless era; a server request each in the handshake era).
_NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@mcpkit.tool
async def test_input_required_result_elicitation(ctx: mcpkit.Context) -> str:
    """Asks for the user's name (elicitation) before answering (SEP-2322)."""
    answers = await _ask(ctx, {"user_name": _form(ctx, "What is your name?", _NAME_SCHEMA)})
    return f"Hello, {_content(answers['user_name']).get('name', 'stranger')}!"


@mcpkit.tool
async def test_input_required_result_sampling(ctx: mcpkit.Context) -> str:
    """Asks the client's model a question (sampling) before answering (SEP-2322)."""
    answers = await _ask(ctx, {"capital_question": _sampling("What is the capital of France?", 100)})
    return f"The model answered: {_sampled_text(answers['capital_question'])}"


@mcpkit.tool
async def test_input_required_result_list_roots(ctx: mcpkit.Context) -> str:
    """Asks for the client's roots before answering (SEP-2322)."""
    answers = await _ask(ctx, {"client_roots": ("roots/list", {})})
    roots = answers["client_roots"].get("roots") or []
    uris = ", ".join(str(r.get("uri")) for r in roots if isinstance(r, dict))
    return f"The client has {len(roots)} root(s): {uris}"


_REQUEST_STATE = "request-state-round-1"


@mcpkit.tool
async def test_input_required_result_request_state(ctx: mcpkit.Context) -> str:
    """Asks for a confirmation and carries sealed requestState across the round trip (SEP-2322)."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answers = await _ask(ctx, {"confirm": _form(ctx, "Please confirm", schema)}, state=_REQUEST_STATE)
    ok = _content(answers["confirm"]).get("ok")
    if ctx.stateless and ctx.request_state != _REQUEST_STATE:
        return f"state-missing: the retry did not carry the requestState (confirmed={ok})"
    return f"state-ok: confirmed={ok}"


@mcpkit.tool
async def test_input_required_result_multiple_inputs(ctx: mcpkit.Context) -> str:
    """Asks for an elicitation, a sampling and the roots in one round (SEP-2322)."""
    answers = await _ask(ctx, {
        "user_name": _form(ctx, "What is your name?", _NAME_SCHEMA),
        "greeting": _sampling("Generate a greeting", 50),
        "client_roots": ("roots/list", {}),
    }, state="multiple-inputs")
    name = _content(answers["user_name"]).get("name", "stranger")
    roots = answers["client_roots"].get("roots") or []
    return f"Name: {name}; greeting: {_sampled_text(answers['greeting'])}; roots: {len(roots)}"


@mcpkit.tool
async def test_input_required_result_multi_round(ctx: mcpkit.Context) -> str:
    """Two rounds of questions (name, then favourite colour), each with its own requestState (SEP-2322)."""
    color_schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    state = ctx.request_state if isinstance(ctx.request_state, dict) else {}
    if state.get("step") == 2:
        name = state.get("name", "stranger")
    else:  # first round (or the handshake era, where both questions go out in one call)
        step1 = await _ask(ctx, {"step1": _form(ctx, "Step 1: What is your name?", _NAME_SCHEMA)}, state={"step": 1})
        name = _content(step1["step1"]).get("name", "stranger")
    step2 = await _ask(ctx, {"step2": _form(ctx, "Step 2: What is your favorite color?", color_schema)}, state={"step": 2, "name": name})
    color = _content(step2["step2"]).get("color", "no colour")
    return f"Hello, {name}! Your favorite color is {color}."


@mcpkit.tool
async def test_input_required_result_tampered_state(ctx: mcpkit.Context) -> str:
    """Round-trips integrity-protected requestState; an altered state is refused with -32602 (SEP-2322)."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    answers = await _ask(ctx, {"confirm": _form(ctx, "Please confirm", schema)}, state="tamper-check")
    return f"State verified: confirmed={_content(answers['confirm']).get('ok')}"


@mcpkit.tool
async def test_input_required_result_capabilities(ctx: mcpkit.Context) -> str:
    """Asks only for the kinds of input the client declared it can provide (SEP-2322)."""
    caps = ctx.client_capabilities
    requests: dict[str, tuple[str, dict[str, Any]]] = {}
    if "elicitation" in caps:
        requests["user_name"] = _form(ctx, "What is your name?", _NAME_SCHEMA)
    if "sampling" in caps:
        requests["capital_question"] = _sampling("What is the capital of France?", 100)
    if "roots" in caps:
        requests["client_roots"] = ("roots/list", {})
    if not requests:
        return "The client declared none of elicitation, sampling and roots: nothing to ask."
    answers = await _ask(ctx, requests, state="capabilities")
    return f"Received {len(answers)} input(s): {', '.join(sorted(answers))}"


_JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        },
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcpkit.tool(input_schema=_JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,  # noqa: N803 - the schema's property name
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features ($schema, $defs, allOf, if/then/else) for conformance testing (SEP-1613)."""
    given = {k: v for k, v in {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}.items() if v is not None}
    return f"JSON Schema 2020-12 tool called with: {json.dumps(given)}"


@mcpkit.tool
async def test_reconnection(ctx: mcpkit.Context) -> str:
    """Tests SSE polling: closes the response stream before the result, which the client gets on reconnecting."""
    await ctx.log("info", "Before disconnect")
    await ctx.close_stream(retry_ms=500)
    await trio.sleep(0.2)
    await ctx.log("info", "After reconnect")
    return "Reconnection test completed"


@mcpkit.tool
async def test_trigger_tool_change(ctx: mcpkit.Context) -> str:
    """Sends notifications/tools/list_changed to listening clients."""
    await ctx.notify_list_changed("tools")
    return "Tool list change notified."


@mcpkit.tool
async def test_trigger_prompt_change(ctx: mcpkit.Context) -> str:
    """Sends notifications/prompts/list_changed to listening clients."""
    await ctx.notify_list_changed("prompts")
    return "Prompt list change notified."


@mcpkit.tool
async def test_streaming_elicitation(ctx: mcpkit.Context) -> str:
    """Asks for input while streaming: an InputRequiredResult in the stateless era, never a server request."""
    answer = await _ask(ctx, {"user_name": _form(ctx, "What is your name?", _NAME_SCHEMA)})
    return f"Hello, {_content(answer['user_name']).get('name', 'stranger')}!"


@mcpkit.tool
async def test_logging_tool(ctx: mcpkit.Context) -> str:
    """Logs a message; in the stateless era only requests that carry a log level receive it."""
    await ctx.log("info", "test_logging_tool was called")
    return "Logging tool completed."


TOOLS = [
    test_simple_text,
    test_image_content,
    test_audio_content,
    test_embedded_resource,
    test_multiple_content_types,
    test_tool_with_logging,
    test_tool_with_progress,
    test_sampling,
    test_elicitation,
    test_elicitation_sep1034_defaults,
    test_elicitation_sep1330_enums,
    test_error_handling,
    test_x_mcp_header,
    test_missing_capability,
    test_input_required_result_elicitation,
    test_input_required_result_sampling,
    test_input_required_result_list_roots,
    test_input_required_result_request_state,
    test_input_required_result_multiple_inputs,
    test_input_required_result_multi_round,
    test_input_required_result_tampered_state,
    test_input_required_result_capabilities,
    json_schema_2020_12_tool,
    test_reconnection,
    test_trigger_tool_change,
    test_trigger_prompt_change,
    test_streaming_elicitation,
    test_logging_tool,
]
