"""End to end: the official `mcp` SDK client drives `mcpkit serve --plugin codesearch`
over stdio: index a real git repository (with progress), search it, read a file."""

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import mcp  # the official SDK's client (this plugin's [test] extra): missing, the test fails
import pytest

from . import hostile_git as hg
from .conftest import commit_all, git_init, write


def _mcpkit() -> str:
    exe = Path(sys.executable).with_name("mcpkit")
    found = str(exe) if exe.exists() else shutil.which("mcpkit")
    if not found:
        pytest.fail("the mcpkit command is not installed (install mcpkit with this plugin: make install)")
    return found


def _run(tmp: Path, actions: Any, root: Path | None = None) -> Any:
    config = tmp / "mcpkit.toml"
    config.write_text(f"[plugins.codesearch]\ndatabase = {json.dumps(str(tmp / 'cs.sqlite3'))}\n"
                      f"roots = [{json.dumps(str(root or tmp))}]\n")
    params = mcp.StdioServerParameters(
        command=_mcpkit(), args=["serve", "--plugin", "codesearch", "--config", str(config)],
        cwd=str(tmp), env={"MCPKIT_DATA_DIR": str(tmp / "data")},
    )

    async def session() -> Any:
        async with mcp.Client(params) as client:
            return await actions(client)

    return asyncio.run(asyncio.wait_for(session(), timeout=60))


def test_index_search_and_read_over_stdio(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "shop")
    write(repo, ".gitignore", "secret.txt\n")
    write(repo, "secret.txt", "def checkout_total(): hidden\n")
    write(repo, "app/cart.py", "class Cart:\n    def checkout_total(self):\n        return 0\n")
    for i in range(150):
        write(repo, f"app/gen/m{i}.py", f"VALUE_{i} = {i}\n")
    commit_all(repo, "init")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def actions(client: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": {t.name: t for t in (await client.list_tools()).tools}}
        out["templates"] = (await client.list_resource_templates()).resource_templates
        out["index"] = await client.call_tool("index_repository", {"repository": str(repo)},
                                              progress_callback=on_progress)
        out["search"] = await client.call_tool("search_code", {"term": "CHECKOUT_total"})
        out["regex"] = await client.call_tool(
            "search_code", {"term": r"VALUE_1\d\d =", "regex": True, "limit": 500,
                            "path": "app/gen/*", "case_sensitive": True})
        out["bad_regex"] = await client.call_tool("search_code", {"term": "(", "regex": True})
        out["empty"] = await client.call_tool("search_code", {"term": ""})
        out["unknown"] = await client.call_tool("search_code", {"term": "x", "project": "nope"})
        out["recent"] = await client.call_tool("list_recent_files", {"limit": 2})
        started = await client.call_tool("index_repository",
                                         {"repository": str(repo), "wait": False})
        out["started"] = started
        run_id = started.structured_content["run_id"]
        for _ in range(100):
            status = await client.call_tool("index_status", {"run_id": run_id})
            if status.structured_content["status"] != "running":
                break
            await asyncio.sleep(0.05)
        out["status"] = status
        out["file"] = await client.read_resource("code://shop/app/cart.py")
        try:
            await client.read_resource("code://shop/secret.txt")
            out["missing"] = None
        except Exception as exc:
            out["missing"] = exc
        return out

    out = _run(tmp_path, actions)
    tools = out["tools"]
    assert {"index_repository", "index_status", "search_code", "list_recent_files"} <= set(tools)
    props = tools["search_code"].input_schema["properties"]
    assert props["term"]["maxLength"] == 500 and props["limit"]["maximum"] == 500
    assert "results" in tools["search_code"].output_schema["properties"]
    assert [t.uri_template for t in out["templates"]] == ["code://{project}/{path}"]

    index = out["index"]
    assert not index.is_error, index.content
    assert index.structured_content["status"] == "completed"
    assert index.structured_content["files_added"] == 152  # .gitignore, cart.py, 150 modules
    values = [p[0] for p in progress]
    assert len(values) >= 3 and values == sorted(values) and len(set(values)) == len(values)
    assert progress[-1][1] == 152

    hits = out["search"].structured_content
    assert hits["total"] == 1 and not hits["truncated"]
    assert hits["results"][0] == {
        "project": "shop", "path": "app/cart.py", "line": 2, "column": 9,
        "snippet": "    def checkout_total(self):", "context_before": ["class Cart:"],
        "context_after": ["        return 0"]}
    assert out["regex"].structured_content["total"] == 50
    assert out["bad_regex"].is_error and "invalid regular expression" in \
        out["bad_regex"].content[0].text
    assert out["empty"].is_error and "term" in out["empty"].content[0].text
    assert out["unknown"].is_error and "unknown project 'nope'" in out["unknown"].content[0].text
    assert len(out["recent"].structured_content["files"]) == 2

    assert out["started"].structured_content["status"] == "running"
    final = out["status"].structured_content
    assert final["status"] == "completed" and final["files_unchanged"] == 152
    assert out["file"].contents[0].text.startswith("class Cart:")
    assert "not found" in str(out["missing"]).lower()


def test_hostile_repositories_over_stdio(tmp_path: Path) -> None:
    """Through a real server: a repository naming programs is indexed without running them; one
    whose .git file leads outside the roots is an isError naming the reason; nothing outside is served."""
    scene = hg.make_scene(tmp_path / "scene")
    programs = hg.every_program(scene, scene.allowed / "programs")
    escape = hg.gitdir_file(scene, scene.allowed / "escape")

    async def actions(client: Any) -> dict[str, Any]:
        out = {}
        for name, case in (("programs", programs), ("escape", escape)):
            for ref in (None, "HEAD"):
                out[name, ref] = await client.call_tool(
                    "index_repository", {"repository": str(case.repository), "ref": ref, "project": name})
        out["search"] = await client.call_tool("search_code", {"term": hg.SECRET})
        return out

    out = _run(tmp_path, actions, root=scene.allowed)
    for ref in (None, "HEAD"):
        assert out["programs", ref].structured_content["status"] == "completed", out["programs", ref].content
        refused = out["escape", ref]
        assert refused.is_error and "is outside the directories this server may index" in refused.content[0].text
    assert out["search"].structured_content["total"] == 0
    assert scene.executions() == []
