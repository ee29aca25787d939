"""End to end: the official ``mcp`` SDK client talks to ``mcpkit serve --plugin openapi`` over stdio."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import mcp  # the official SDK's client (this plugin's [test] extra): missing, the test fails
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def _mcpkit() -> str:
    exe = Path(sys.executable).with_name("mcpkit")
    found = str(exe) if exe.exists() else shutil.which("mcpkit")
    if not found:
        pytest.fail("the mcpkit command is not installed (install mcpkit with this plugin: make install)")
    return found


def _config(tmp: Path, specs: list[str]) -> Path:
    path = tmp / "mcpkit.toml"
    listed = ", ".join(json.dumps(s) for s in specs)
    path.write_text(f'[plugins.openapi]\nspecs = [{listed}]\ncache_dir = {json.dumps(str(tmp / "cache"))}\n')
    return path


async def _session(config: Path, cwd: Path, actions: Any) -> Any:
    params = mcp.StdioServerParameters(
        command=_mcpkit(), args=["serve", "--plugin", "openapi", "--config", str(config)],
        cwd=str(cwd), env={"MCPKIT_DATA_DIR": str(cwd / "data")},
    )
    async with mcp.Client(params) as client:
        return await actions(client)


def _run(config: Path, cwd: Path, actions: Any) -> Any:
    return asyncio.run(asyncio.wait_for(_session(config, cwd, actions), timeout=60))


def test_search_then_describe_over_stdio(tmp_path: Path) -> None:
    # relative spec paths resolve against the server's current directory
    (tmp_path / "specs").mkdir()
    for name in ("petstore-3.0.yaml", "shop-swagger-2.0.json", "broken.json"):
        shutil.copy(FIXTURES / name, tmp_path / "specs" / name)
    config = _config(tmp_path, ["specs/petstore-3.0.yaml", "specs/shop-swagger-2.0.json", "specs/broken.json"])

    async def actions(client: Any) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        found = await client.call_tool("search_ids", {"query": "remove a pet", "limit": 3})
        first = found.structured_content["operations"][0]["operation_id"]
        described = await client.call_tool("get_operation", {"operation_id": first})
        unknown = await client.call_tool("get_operation", {"operation_id": "shop:placeOrdr"})
        too_many = await client.call_tool("search_ids", {"query": "orders", "limit": 50})
        empty = await client.call_tool("search_ids", {"query": ""})
        return {"tools": tools, "found": found, "described": described, "unknown": unknown,
                "too_many": too_many, "empty": empty}

    out = _run(config, tmp_path, actions)
    assert {"search_ids", "get_operation"} <= set(out["tools"])
    search_tool = out["tools"]["search_ids"]
    assert "Example" in search_tool.description and "similarity_score" in search_tool.description
    assert search_tool.input_schema["properties"]["limit"]["maximum"] == 20
    assert search_tool.input_schema["properties"]["query"]["maxLength"] == 500

    found = out["found"]
    assert not found.is_error
    ops = found.structured_content["operations"]
    assert ops[0]["operation_id"] == "pet-store:DELETE /pets/{petId}"
    assert all(0.0 <= o["similarity_score"] <= 1.0 for o in ops)
    assert [o["similarity_score"] for o in ops] == sorted((o["similarity_score"] for o in ops), reverse=True)

    details = out["described"].structured_content
    assert details["method"] == "DELETE" and details["path"] == "/pets/{petId}"
    assert details["parameters"][0]["name"] == "petId" and details["parameters"][0]["in"] == "path"
    assert "204" in details["responses"]

    assert out["unknown"].is_error
    assert "shop:placeOrder" in out["unknown"].content[0].text
    assert out["too_many"].is_error and out["empty"].is_error


def test_embedded_default_without_specs(tmp_path: Path) -> None:
    config = tmp_path / "mcpkit.toml"
    config.write_text(f'[plugins.openapi]\ncache_dir = {json.dumps(str(tmp_path / "cache"))}\n')

    async def actions(client: Any) -> Any:
        return await client.call_tool("search_ids", {"query": "move this issue to done"})

    result = _run(config, tmp_path, actions)
    assert not result.is_error
    assert result.structured_content["operations"][0]["operation_id"] == "transitionIssue"
    assert "embedded demo" in result.structured_content["note"]


@pytest.mark.parametrize("delay", [0.5, 1.0, 2.0])
def test_the_server_exits_cleanly_while_embeddings_build(tmp_path: Path, delay: float) -> None:
    """A host that connects and leaves while the embeddings of a new spec are still being
    computed in the background: the server exits with 0 (a daemon thread left inside
    onnxruntime while the interpreter finalises aborted the process: "terminate called without
    an active exception", exit 134)."""
    import gzip
    import subprocess
    import time

    spec = tmp_path / "stripe.json"  # 417 operations: embedding them takes seconds
    spec.write_bytes(gzip.decompress((Path(__file__).parents[1] / "eval" / "specs" / "stripe.json.gz").read_bytes()))
    config = _config(tmp_path, [str(spec)])
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    proc = subprocess.Popen([_mcpkit(), "serve", "--plugin", "openapi", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env={"MCPKIT_DATA_DIR": str(tmp_path / "data")})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(init) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        time.sleep(delay)  # the background thread is now loading the model or embedding
        proc.stdin.close()
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, f"exit {code}: {stderr[-2000:]}"
    assert "terminate called" not in stderr
