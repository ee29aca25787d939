"""A client for the official MCP conformance harness in client mode, built on mcpkit.client.

The harness starts a mock server for one scenario and runs this program with the server's URL as
the last argument. It says what to do through the environment:

* ``MCP_CONFORMANCE_SCENARIO``: the scenario name (see ``SCENARIOS`` below);
* ``MCP_CONFORMANCE_PROTOCOL_VERSION``: the protocol version to speak. It is pinned, which also
  pins the era: up to 2025-11-25 the initialize handshake, from 2026-07-28 the stateless era;
* ``MCP_CONFORMANCE_CONTEXT``: JSON with scenario data (only some scenarios have it).

Each scenario is a short piece of ordinary client code. Everything that is protocol (headers,
SSE resumption, version negotiation, input-request loops, dropping tools with bad header
annotations) is done by the library; what stays here is application policy, such as what to
answer an elicitation with. Exit status 0 means the scenario ran; anything else prints one line.

    scripts/conformance-harness client --command ".venv/bin/python examples/conformance-client/client.py" \\
        --scenario tools_call --spec-version 2026-07-28
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, Awaitable, Callable

import trio

import mcpkit.client as mc

log = logging.getLogger("conformance-client")
Scenario = Callable[[str, str, dict[str, Any]], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        SCENARIOS[name] = fn
        return fn
    return register


def connect(url: str, version: str, **kwargs: Any):
    """Connect speaking exactly ``version``, as this program's name and version."""
    return mc.connect(url, protocol_version=version, client_name="mcpkit-conformance-client",
                      request_timeout=20.0, **kwargs)


# --- application policy: what to answer the server's questions with -------------------------

def accept_with_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """Accept an elicitation, filling each field with the default its schema gives (SEP-1034)."""
    properties = (params.get("requestedSchema") or {}).get("properties") or {}
    content = {name: prop["default"] for name, prop in properties.items()
               if isinstance(prop, dict) and "default" in prop}
    return {"action": "accept", "content": content}


def confirm(params: dict[str, Any]) -> dict[str, Any]:
    """Say yes to a confirmation form: booleans true, other fields their defaults."""
    answer = accept_with_defaults(params)
    properties = (params.get("requestedSchema") or {}).get("properties") or {}
    for name, prop in properties.items():
        if isinstance(prop, dict) and prop.get("type") == "boolean":
            answer["content"].setdefault(name, True)
    return answer


def no_sampling(params: dict[str, Any]) -> dict[str, Any]:
    raise mc.RpcError("this client does not sample", -32603)


def stub_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """Placeholder values for a tool's required arguments."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    stubs = {"string": "x", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}
    return {name: stubs.get((props.get(name) or {}).get("type"), "x") for name in schema.get("required") or []}


# --- the scenarios ---------------------------------------------------------------------------

@scenario("initialize")
async def initialize(url: str, version: str, context: dict[str, Any]) -> None:
    async with connect(url, version) as client:
        await client.list_tools()


@scenario("tools_call")
async def tools_call(url: str, version: str, context: dict[str, Any]) -> None:
    async with connect(url, version) as client:
        result = await client.call_tool("add_numbers", {"a": 5, "b": 3})
        log.info("add_numbers: %s", result.text)


@scenario("elicitation-sep1034-client-defaults")
async def elicitation_defaults(url: str, version: str, context: dict[str, Any]) -> None:
    async with connect(url, version, on_elicitation=accept_with_defaults) as client:
        result = await client.call_tool("test_client_elicitation_defaults", {})
        log.info("elicitation: %s", result.text)


@scenario("sse-retry")
async def sse_retry(url: str, version: str, context: dict[str, Any]) -> None:
    # The server closes the tool call's stream before answering; the library waits the
    # stream's `retry` delay and resumes with GET + Last-Event-ID.
    async with connect(url, version) as client:
        result = await client.call_tool("test_reconnection", {})
        log.info("reconnection: %s", result.text)


@scenario("request-metadata")
async def request_metadata(url: str, version: str, context: dict[str, Any]) -> None:
    # Offer every capability, so the server sees them declared in each request's _meta.
    async with connect(url, version, on_elicitation=accept_with_defaults, on_sampling=no_sampling,
                       roots=[]) as client:
        await client.list_tools()
        await client.call_tool("add_numbers", {"a": 5, "b": 3}, validate=False)


@scenario("sep-2322-client-request-state")
async def request_state(url: str, version: str, context: dict[str, Any]) -> None:
    # Tools that answer "input_required": the library answers (through on_elicitation) and
    # retries with the server's requestState until the result is complete.
    async with connect(url, version, on_elicitation=confirm) as client:
        for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
            result = await client.call_tool(name, {})
            log.info("%s: %s", name, result.text)


@scenario("http-standard-headers")
async def standard_headers(url: str, version: str, context: dict[str, Any]) -> None:
    async with connect(url, version) as client:
        await client.call_tool("test_headers", {})
        for resource in await client.list_resources():
            if resource.get("uri", "").startswith("file:"):
                await client.read_resource(resource["uri"])
        for prompt in await client.list_prompts():
            await client.get_prompt(prompt["name"])


@scenario("http-custom-headers")
async def custom_headers(url: str, version: str, context: dict[str, Any]) -> None:
    # Replay the calls the harness asks for; the library mirrors x-mcp-header arguments.
    async with connect(url, version) as client:
        offered = {tool["name"] for tool in await client.list_tools()}
        for call in context.get("toolCalls") or []:
            if call["name"] in offered:
                # Sent exactly as given: some values (a null for a boolean) are there on purpose.
                await client.call_tool(call["name"], call.get("arguments") or {}, validate=False)


@scenario("http-invalid-tool-headers")
async def invalid_tool_headers(url: str, version: str, context: dict[str, Any]) -> None:
    # The library leaves out tools whose x-mcp-header annotations are invalid; call the rest.
    async with connect(url, version) as client:
        for tool in await client.list_tools():
            try:
                await client.call_tool(tool["name"], stub_arguments(tool))
            except mc.McpError as exc:
                log.warning("%s: %s", tool["name"], exc)


@scenario("json-schema-ref-no-deref")
async def ref_no_deref(url: str, version: str, context: dict[str, Any]) -> None:
    # Tool schemas are kept as given: a $ref is never fetched.
    async with connect(url, version) as client:
        for tool in await client.list_tools():
            log.info("tool %s: %s", tool["name"], json.dumps(tool.get("inputSchema")))


@scenario("json-schema-2020-12-preservation")
async def schema_preservation(url: str, version: str, context: dict[str, Any]) -> None:
    # Send a tool's input schema back exactly as the client holds it.
    async with connect(url, version) as client:
        tool = await client.tool("json_schema_2020_12_tool")
        if tool is None:
            raise LookupError("the server offers no json_schema_2020_12_tool")
        await client.call_tool("json_schema_echo", {"schema": tool["inputSchema"]})


# --- authorization (auth/*): OAuth against the harness's mock authorization servers -----------

#: the client metadata document URL the harness's authorization servers accept (CIMD)
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def oauth_for(name: str, context: dict[str, Any]) -> Any:
    """How this client authorizes in each scenario: application policy (which grant, which
    credentials); the flow itself is the library's."""
    from mcpkit.client.oauth import HeadlessAuthorizer, IdJagExchange, OAuth

    if name == "auth/client-credentials-jwt":
        return OAuth(grant="client_credentials", client_id=context["client_id"], client_auth_method="private_key_jwt",
                     private_key=context["private_key_pem"], signing_alg=context.get("signing_algorithm", "ES256"))
    if name == "auth/client-credentials-basic":
        return OAuth(grant="client_credentials", client_id=context["client_id"], client_secret=context["client_secret"],
                     client_auth_method="client_secret_basic")
    if name == "auth/enterprise-managed-authorization":
        exchange = IdJagExchange(context["idp_token_endpoint"], context["idp_id_token"], idp_client_id=context["idp_client_id"])
        return OAuth(grant="jwt_bearer", client_id=context["client_id"], client_secret=context["client_secret"],
                     client_auth_method="client_secret_basic", assertion=exchange)
    if name == "auth/wif-jwt-bearer":
        return OAuth(grant="jwt_bearer", client_id=context["client_id"], client_auth_method="none",
                     assertion=context["valid_jwt"])
    # The harness's authorization endpoints approve at once and redirect: no browser needed.
    authorizer = HeadlessAuthorizer("http://localhost:3000/callback")
    if "client_id" in context:  # pre-registered credentials, bound to their issuer
        return OAuth(authorizer=authorizer, client_name="mcpkit-conformance-client", client_id=context["client_id"],
                     client_secret=context.get("client_secret"), client_issuer=context.get("issuer"))
    return OAuth(authorizer=authorizer, client_name="mcpkit-conformance-client", client_metadata_url=CLIENT_METADATA_URL)


async def authorized(url: str, version: str, context: dict[str, Any]) -> None:
    """Every auth/* scenario: connect, list the tools and call each (the library answers
    401 and 403 challenges along the way)."""
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    async with connect(url, version, oauth=oauth_for(name, context)) as client:
        for tool in await client.list_tools():
            result = await client.call_tool(tool["name"], stub_arguments(tool))
            log.info("%s: %s", tool["name"], result.text)


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or "2025-11-25"
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if len(sys.argv) < 2:
        print("usage: client.py SERVER_URL (with MCP_CONFORMANCE_SCENARIO set)", file=sys.stderr)
        return 2
    run = SCENARIOS.get(name) or (authorized if name.startswith("auth/") else None)
    if run is None:
        print(f"conformance-client: unknown scenario {name!r}", file=sys.stderr)
        return 2
    try:
        trio.run(run, sys.argv[-1], version, context)
    except Exception as exc:  # one line for the harness log, whatever went wrong
        text = str(exc) if isinstance(exc, mc.McpError) else f"{type(exc).__name__}: {exc}"
        print(f"conformance-client: {name}: {text}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
