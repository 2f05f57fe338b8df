"""The Python codec and the action/task helpers, without a server."""

from __future__ import annotations

import msgpack
import pytest

from kforge import KForgeError, action_params
from kforge.env import reset_params
from kforge.protocol import ERROR_CODES, decode_reply, encode_request


def test_request_encoding():
    message = msgpack.unpackb(encode_request(7, "step", {"env_id": 1}), raw=False)
    assert message == {"v": 1, "id": 7, "method": "step", "params": {"env_id": 1}}


def test_replies_decode_including_non_utf8_text():
    ok = decode_reply(msgpack.packb({"v": 1, "id": 3, "ok": True, "result": {"text": "a"}}))
    assert ok.ok and ok.id == 3 and ok.result == {"text": "a"}
    # Compiler output is not always UTF-8: it must not make the reply unreadable.
    raw = msgpack.packb({"v": 1, "id": 4, "ok": True, "result": {"text": "x"}}).replace(b"\xa1x", b"\xa1\xff")
    assert decode_reply(raw).result["text"] == "\ufffd"
    err = decode_reply(
        msgpack.packb({"v": 1, "id": 5, "ok": False, "error": {"code": "unknown_env", "message": "m", "field": "/f"}})
    )
    e = err.to_error(env_id=2)
    assert (e.code, e.message, e.field, e.request_id, e.env_id) == ("unknown_env", "m", "/f", 5, 2)
    assert str(e) == "unknown_env: m (field /f)"


def test_malformed_replies_raise():
    for payload in (b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"v": 2, "id": 1, "ok": True})):
        with pytest.raises(KForgeError) as e:
            decode_reply(payload)
        assert e.value.code == "bad_reply"


def test_error_codes_match_the_protocol_document():
    assert "invalid_task" in ERROR_CODES and "pool_full" in ERROR_CODES and len(set(ERROR_CODES)) == 14


def test_actions_are_tool_calls_unless_typed():
    call = {"id": "c", "type": "function", "function": {"name": "verify", "arguments": "{}"}}
    assert action_params(call) == {"tool_call": call}
    assert action_params({"name": "verify"}) == {"tool_call": {"name": "verify"}}
    typed = {"type": "submit", "solution": {"source": "x"}}
    assert action_params(typed) == {"action": typed}
    assert action_params("garbage") == {"tool_call": "garbage"}

    class SdkToolCall:  # what the OpenAI SDK returns (pydantic)
        def model_dump(self):
            return call

    assert action_params(SdkToolCall()) == {"tool_call": call}


def test_reset_params():
    assert reset_params({"id": "t"}, None, 3, {"exemplars": []}) == {"task": {"id": "t"}, "seed": 3, "exemplars": []}
    assert reset_params(None, "t", None, None) == {"task_id": "t"}
    with pytest.raises(ValueError):
        reset_params({"id": "t"}, "t", None, None)
    with pytest.raises(ValueError):
        reset_params(None, None, None, None)
