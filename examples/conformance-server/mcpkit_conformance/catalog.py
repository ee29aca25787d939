"""The conformance resources, prompts and completions."""

from __future__ import annotations

import json
from typing import Annotated

import msgspec

import mcpkit

from .tools import PNG_B64, _ask, _content, _form


# -- resources (test://static-text must be listed first) ----------------------------------------
@mcpkit.resource("test://static-text", name="static-text", title="Static Text Resource",
                 description="A static text resource for testing", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcpkit.resource("test://static-binary", name="static-binary", title="Static Binary Resource",
                 description="A static binary resource (image) for testing", mime_type="image/png")
def static_binary() -> mcpkit.BlobResourceContents:
    return mcpkit.BlobResourceContents(uri="test://static-binary", mimeType="image/png", blob=PNG_B64)


@mcpkit.resource("test://watched-resource", name="watched-resource", title="Watched Resource",
                 description="A resource clients can subscribe to", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


@mcpkit.resource("test://template/{id}/data", name="template", title="Resource Template",
                 description="A resource template with parameter substitution", mime_type="application/json")
def template_data(id: str) -> str:  # noqa: A002 - the template variable is called id
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


RESOURCES = [static_text, static_binary, watched_resource, template_data]


# -- prompts -----------------------------------------------------------------------------------
@mcpkit.prompt(title="Simple Test Prompt")
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcpkit.prompt(title="Prompt With Arguments")
def test_prompt_with_arguments(
    arg1: Annotated[str, msgspec.Meta(description="First test argument")],
    arg2: Annotated[str, msgspec.Meta(description="Second test argument")],
) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcpkit.prompt(title="Prompt With Embedded Resource")
def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, msgspec.Meta(description="URI of the resource to embed")],  # noqa: N803
) -> list[mcpkit.PromptMessage]:
    """A prompt that includes an embedded resource."""
    return [
        mcpkit.PromptMessage(role="user", content=mcpkit.EmbeddedResource(resource=mcpkit.TextResourceContents(
            uri=resourceUri, mimeType="text/plain", text="Embedded resource content for testing.",
        ))),
        mcpkit.PromptMessage(role="user", content=mcpkit.TextContent(text="Please process the embedded resource above.")),
    ]


@mcpkit.prompt(title="Prompt With Image")
def test_prompt_with_image() -> list[mcpkit.PromptMessage]:
    """A prompt that includes image content."""
    return [
        mcpkit.PromptMessage(role="user", content=mcpkit.ImageContent(data=PNG_B64, mimeType="image/png")),
        mcpkit.PromptMessage(role="user", content=mcpkit.TextContent(text="Please analyze the image above.")),
    ]


@mcpkit.prompt(title="Prompt Needing Input")
async def test_input_required_result_prompt(ctx: mcpkit.Context) -> str:
    """A prompt that asks the user for context first (an InputRequiredResult on prompts/get, SEP-2322)."""
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
    answers = await _ask(ctx, {"user_context": _form(ctx, "What context should the prompt use?", schema)})
    return f"Use this context: {_content(answers['user_context']).get('context', '')}"


PROMPTS = [
    test_simple_prompt,
    test_prompt_with_arguments,
    test_prompt_with_embedded_resource,
    test_prompt_with_image,
    test_input_required_result_prompt,
]


# -- completions -------------------------------------------------------------------------------
_SUGGESTIONS = {"arg1": ["test", "testValue1", "example"], "arg2": ["test", "testValue2", "sample"]}


@mcpkit.completion(prompt="test_prompt_with_arguments")
def complete_prompt_arguments(argument: str, value: str, context: dict[str, str]) -> list[str]:
    return [s for s in _SUGGESTIONS.get(argument, []) if s.startswith(value)]
