"""The sans-IO session core (mcpkit/protocol/session.py), driven directly: bytes in, actions out.

These are the rules every transport shares — the in-flight limit, batching, cancellation,
server-to-client request correlation — checked without any I/O, so a failure names the rule.
"""

from __future__ import annotations

import json

import msgspec

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.connection import RequestReceived, ServerConnection
from mcpkit.protocol.session import Cancel, Notified, Resolve, Run, Send, SendBatch, ServerSession
from mcpkit.protocol.types import CallToolParams

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def frame(obj: object) -> bytes:
    return json.dumps(obj).encode()


def request(rid: object, method: str = "tools/list", params: dict | None = None) -> dict:
    msg: dict = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def session(version: str | None = "2025-03-26", **kw: object) -> ServerSession:
    conn = ServerConnection(server_info={"name": "t", "version": "0"}, capabilities={"tools": {}})
    core = ServerSession(conn, **kw)  # type: ignore[arg-type]
    if version is not None:
        (send,) = core.receive(frame(request(0, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {}})))
        assert isinstance(send, Send) and send.answer.error is None
        assert core.receive(frame({"jsonrpc": "2.0", "method": "notifications/initialized"})) == []
    return core


def decoded(answer: jsonrpc.Answer) -> dict:
    return json.loads(answer.encode())


def test_a_request_runs_and_its_answer_is_sent_to_it() -> None:
    core = session()
    (run,) = core.receive(frame(request(7)), origin="post-1")
    assert isinstance(run, Run) and run.request.id == 7 and run.origin == "post-1" and not run.in_batch
    assert core.load == 1
    (send,) = core.finished(run.request, jsonrpc.Answer(7, {"tools": []}))
    assert isinstance(send, Send) and send.request is run.request
    assert decoded(send.answer) == {"jsonrpc": "2.0", "id": 7, "result": {"tools": []}}
    assert core.load == 0


def test_lifecycle_answers_are_sent_at_once_with_their_origin() -> None:
    core = session()
    (send,) = core.receive(frame(request("p", "ping")), origin="o")
    assert isinstance(send, Send) and send.request is None and send.origin == "o"
    assert decoded(send.answer)["result"] == {}


def test_past_the_limit_requests_are_answered_busy_and_the_slot_frees_on_finish() -> None:
    core = session(max_running=2)
    runs = [core.receive(frame(request(i)))[0] for i in (1, 2)]
    assert all(isinstance(r, Run) for r in runs)
    (refused,) = core.receive(frame(request(3)))
    assert isinstance(refused, Send) and refused.answer.code == jsonrpc.SERVER_BUSY and refused.answer.id == 3
    core.finished(runs[0].request, None)  # cancelled: no answer, but the slot is free
    (again,) = core.receive(frame(request(3)))
    assert isinstance(again, Run)


def test_a_reused_id_still_runs_and_a_cancel_reaches_the_newest() -> None:
    core = session()
    (first,) = core.receive(frame(request(5)))
    (second,) = core.receive(frame(request(5)))
    assert isinstance(second, Run) and core.load == 2 and core.running[5] is second.request
    core.finished(second.request, jsonrpc.Answer(5, {}))
    assert core.load == 1 and 5 not in core.running  # the first still runs, no longer cancellable by id
    core.finished(first.request, jsonrpc.Answer(5, {}))
    assert core.load == 0


def test_a_batch_is_answered_once_as_one_array_with_refusals_in_it() -> None:
    core = session()
    batch = [request(1), {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
             {"jsonrpc": "1.0", "id": 9, "method": "x"}, request(2, "ping"), request(3)]
    actions = core.receive(frame(batch), origin="b")
    runs = [a for a in actions if isinstance(a, Run)]
    assert [r.request.id for r in runs] == [1, 3] and all(r.in_batch for r in runs)
    assert any(isinstance(a, Notified) for a in actions)
    assert not any(isinstance(a, (Send, SendBatch)) for a in actions)  # nothing until every member is done
    assert core.finished(runs[1].request, jsonrpc.Answer(3, {"n": 3})) == []
    (done,) = core.finished(runs[0].request, jsonrpc.Answer(1, {"n": 1}))
    assert isinstance(done, SendBatch) and done.origin == "b"
    by_id = {a.id: a for a in done.answers}
    assert set(by_id) == {1, 2, 3, 9}
    assert by_id[9].code == jsonrpc.INVALID_REQUEST and by_id[2].result == {}


def test_a_batch_of_only_immediate_answers_is_sent_at_once_and_a_cancelled_member_is_left_out() -> None:
    core = session()
    (only,) = core.receive(frame([request(1, "ping"), request(2, "ping")]))
    assert isinstance(only, SendBatch) and len(only.answers) == 2
    actions = core.receive(frame([request(3), request(4)]))
    assert core.finished(actions[0].request, None) == []
    (done,) = core.finished(actions[1].request, jsonrpc.Answer(4, {}))
    assert [a.id for a in done.answers] == [4]


def test_batches_are_refused_outside_2025_03_26() -> None:
    core = session("2025-06-18")
    (send,) = core.receive(frame([request(1)]))
    assert isinstance(send, Send) and send.answer.code == jsonrpc.INVALID_REQUEST and "batch" in send.answer.error.message


def test_cancel_names_whether_the_request_runs_here() -> None:
    core = session()
    core.receive(frame(request(1)))
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}}
    (here,) = core.receive(frame(cancel))
    assert here == Cancel(1, "user", True)
    cancel["params"]["requestId"] = 2
    (there,) = core.receive(frame(cancel))
    assert there == Cancel(2, "user", False)


def test_server_requests_get_unique_ids_and_answers_are_matched_once() -> None:
    core = session(ask_prefix="proc-a.")
    rid, data = core.ask("roots/list", {})
    assert rid == "proc-a.1" and json.loads(data) == {"jsonrpc": "2.0", "id": "proc-a.1", "method": "roots/list", "params": {}}
    rid2, _ = core.ask("roots/list", {})
    assert rid2 != rid
    (resolved,) = core.receive(frame({"jsonrpc": "2.0", "id": rid, "result": {"roots": []}}))
    assert resolved == Resolve(rid, {"roots": []}, None, True)
    (late,) = core.receive(frame({"jsonrpc": "2.0", "id": rid, "result": {}}))
    assert isinstance(late, Resolve) and not late.here  # answered already: not ours any more
    core.forget(rid2)
    (forgotten,) = core.receive(frame({"jsonrpc": "2.0", "id": rid2, "error": {"code": -1, "message": "no"}}))
    assert not forgotten.here and forgotten.error.code == -1


def test_close_cancels_every_running_request_and_fails_every_question() -> None:
    core = session()
    core.receive(frame(request(1)))
    core.receive(frame(request(2)))
    rid, _ = core.ask("sampling/createMessage", {})
    actions = core.close()
    assert sorted(a.request_id for a in actions if isinstance(a, Cancel)) == [1, 2]
    (failed,) = [a for a in actions if isinstance(a, Resolve)]
    assert failed.request_id == rid and failed.error is not None and failed.here


def test_untracked_sessions_count_load_but_let_clients_reuse_ids() -> None:
    core = session(None, track=False, max_running=2)
    core.conn.allow_handshake = False
    params = {"name": "greet", "arguments": {"x": 1}, "_meta": META}
    runs = [core.receive(frame(request(1, "tools/call", params)), stateless=True)[0] for _ in range(2)]
    assert all(isinstance(r, Run) for r in runs)  # the same id twice: two clients' business
    (busy,) = core.receive(frame(request(1, "tools/call", params)), stateless=True)
    assert busy.answer.code == jsonrpc.SERVER_BUSY
    assert core.finished(runs[0].request, jsonrpc.Answer(1, {}))[0].request is runs[0].request
    assert core.load == 1


def test_stateless_params_are_decoded_once_and_kept_typed() -> None:
    core = session(None, track=False)
    params = {"name": "greet", "arguments": {"x": 1}, "_meta": META}
    (run,) = core.receive(frame(request(1, "tools/call", params)), stateless=True)
    req: RequestReceived = run.request
    typed = req.typed
    assert isinstance(typed, CallToolParams) and typed.arguments == {"x": 1}
    assert req.params_as(CallToolParams) is typed  # no second decode
    assert req.envelope is not None and req.envelope.protocolVersion == "2026-07-28"


def test_stateless_header_rules_run_in_the_spec_order() -> None:
    core = session(None, track=False)
    params = {"name": "greet", "_meta": META}
    good = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "greet"}

    def code_for(headers: dict[str, str], body: dict) -> int | None:
        msg = jsonrpc.decode(frame(body))
        (action,) = core.receive_message(msg, stateless=True, headers=headers)
        return action.answer.code if isinstance(action, Send) else None

    assert code_for(good, request(1, "tools/call", params)) is None
    no_version = {k: v for k, v in good.items() if k != "mcp-protocol-version"}
    assert code_for(no_version, request(1, "tools/call", params)) == jsonrpc.HEADER_MISMATCH
    assert code_for({**good, "mcp-name": "other"}, request(1, "tools/call", params)) == jsonrpc.HEADER_MISMATCH
    old = {**params, "_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    # the header and the body disagree before the version is judged
    assert code_for(good, request(1, "tools/call", old)) == jsonrpc.HEADER_MISMATCH
    assert code_for({**good, "mcp-protocol-version": "2099-01-01"}, request(1, "tools/call", old)) == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
    assert code_for(good, request(1, "tools/call", {"name": "greet"})) == jsonrpc.INVALID_PARAMS


def test_answers_encode_once_and_expose_their_code() -> None:
    ok = jsonrpc.Answer("a", {"x": [1, 2]})
    assert ok.code is None and msgspec.json.decode(ok.encode()) == {"jsonrpc": "2.0", "id": "a", "result": {"x": [1, 2]}}
    bad = jsonrpc.Answer.failure(None, jsonrpc.ProtocolError(-32600, "no", {"k": 1}))
    assert bad.code == -32600 and json.loads(bad.encode())["error"] == {"code": -32600, "message": "no", "data": {"k": 1}}
