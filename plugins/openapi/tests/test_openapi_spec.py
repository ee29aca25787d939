from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpkit_openapi.refs import Resolver
from mcpkit_openapi.spec import SpecError, load_operations, load_spec_file, parse_document


def _ops(path: Path) -> dict:
    return {op.operation_id: op for op in load_spec_file(path)[1].operations}


def test_openapi_30_yaml(fixtures: Path) -> None:
    raw, parsed = load_spec_file(fixtures / "petstore-3.0.yaml")
    assert (parsed.title, parsed.spec_version) == ("Pet Store", "3.0.3")
    ops = {op.operation_id: op for op in parsed.operations}
    assert list(ops) == ["listPets", "POST /pets", "showPetById", "DELETE /pets/{petId}", "PUT /pets/{petId}/photos"]
    listing = ops["listPets"]
    assert listing.method == "GET" and listing.tags == ["pets"]
    assert [p["name"] for p in listing.parameters] == ["limit", "species"]  # $ref parameter resolved
    assert listing.parameters[1]["schema"]["enum"] == ["dog", "cat", "bird"]
    assert listing.responses == {"200": "A paged array of pets", "default": "unexpected error"}
    create = ops["POST /pets"]
    assert create.synthesized_id and not listing.synthesized_id
    assert create.request_body["required"] is True and create.request_body["description"] == "The pet to add"
    assert create.request_body["schema"]["title"] == "NewPet"
    assert create.responses == {"201": "Created"}  # YAML integer key
    # path-level parameter inherited, operation-level one overrides it
    assert ops["showPetById"].parameters[0]["description"] == "The id of the pet to retrieve"
    assert ops["DELETE /pets/{petId}"].parameters[0]["schema"] == {"type": "integer"}
    assert ops["PUT /pets/{petId}/photos"].request_body["content_types"] == ["image/png"]


def test_cyclic_refs_are_guarded(fixtures: Path) -> None:
    doc = parse_document((fixtures / "petstore-3.0.yaml").read_bytes(), "x.yaml")
    pet = Resolver(doc).compact_schema({"$ref": "#/components/schemas/Pet"})
    second = pet["allOf"][1]["properties"]
    assert second["parent"] == {"$ref": "Pet", "recursive": True}
    assert second["owner"]["properties"]["pets"]["items"] == {"$ref": "Pet", "recursive": True}
    json.dumps(pet)  # finite


def test_openapi_31_json(fixtures: Path) -> None:
    ops = _ops(fixtures / "library-3.1.json")
    assert list(ops) == ["searchBooks", "addBook", "borrowBook"]  # webhooks are not callable paths
    search = ops["searchBooks"]
    assert search.parameters[1]["schema"]["properties"]["genre"]["note"].startswith("unresolvable")
    body = ops["addBook"].request_body
    assert body["schema"]["description"] == "The book, without its id"  # $ref sibling kept (3.1)
    assert body["schema"]["properties"]["subtitle"]["type"] == ["string", "null"]
    author = body["schema"]["properties"]["author"]
    assert author["properties"]["books"]["items"] == {"$ref": "Book", "recursive": True}
    assert ops["addBook"].responses["4XX"] == "Client error"
    assert ops["borrowBook"].deprecated


def test_swagger_20(fixtures: Path) -> None:
    raw, parsed = load_spec_file(fixtures / "shop-swagger-2.0.json")
    assert parsed.spec_version == "2.0"
    ops = {op.operation_id: op for op in parsed.operations}
    assert set(ops) == {"placeOrder", "GET /orders", "uploadReceipt", "getOrder", "getOrder#2"}
    place = ops["placeOrder"]
    assert place.request_body["content_types"] == ["application/json"]
    assert place.request_body["schema"]["properties"]["items"]["items"]["title"] == "Item"
    assert [p["name"] for p in place.parameters] == ["Idempotency-Key"]
    assert place.responses["400"] == "The request was malformed"
    listing = ops["GET /orders"]
    assert listing.parameters[0]["schema"]["items"]["enum"] == ["placed", "shipped"]
    upload = ops["uploadReceipt"]
    assert upload.request_body["content_types"] == ["multipart/form-data"]
    assert upload.request_body["schema"]["required"] == ["file"]
    assert upload.parameters == [{"name": "orderId", "in": "path", "required": True, "schema": {"type": "integer"}}]
    assert ops["getOrder#2"].method == "DELETE"  # duplicate operationIds stay distinct


@pytest.mark.parametrize(
    ("name", "message"),
    [("broken.json", "invalid JSON"), ("not-a-spec.yaml", "neither 'openapi")],
)
def test_invalid_documents(fixtures: Path, name: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec_file(fixtures / name)


def test_unreadable_and_malformed(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_spec_file(tmp_path / "missing.json")
    with pytest.raises(SpecError, match="'paths' is not an object"):
        load_operations({"openapi": "3.0.0", "paths": []})
    with pytest.raises(SpecError, match="not an object"):
        load_operations({"swagger": "2.0", "paths": {"/a": {"get": "nope"}}})
    with pytest.raises(SpecError):
        load_operations(["openapi"])
    assert load_operations({"openapi": "3.1.0", "info": {"title": "t"}}).operations == []


def test_paragraphs_repeated_across_the_spec_are_not_an_operations_own_text() -> None:
    """Bluesky opens every description with the same notice; the ranking reads what follows."""
    from mcpkit_openapi.lexical import summary_of

    notice = "*This endpoint is part of the public API. Requests may need auth.*"
    paths = {f"/xrpc/thing.do{i}": {"get": {"operationId": f"thing.do{i}",
                                            "description": f"{notice}\n\nDoes thing number {i}."}}
             for i in range(6)}
    paths["/xrpc/thing.bare"] = {"get": {"operationId": "thing.bare", "description": notice}}
    paths["/xrpc/thing.plain"] = {"get": {"operationId": "thing.plain", "description": "Plain words."}}
    ops = {op.operation_id: op for op in load_operations({"openapi": "3.0.0", "paths": paths}).operations}
    assert ops["thing.do3"].own_text == "Does thing number 3."
    assert summary_of(ops["thing.do3"]) == "Does thing number 3"
    assert ops["thing.do3"].description.startswith(notice)  # get_operation still shows it all
    assert ops["thing.bare"].own_text == "" and summary_of(ops["thing.bare"]) == ""
    assert ops["thing.plain"].own_description is None and summary_of(ops["thing.plain"]) == "Plain words"
