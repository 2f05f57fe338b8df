#!/usr/bin/python3
"""A small OpenAI-compatible chat-completions server for the HTTP policy tests.

It is a real HTTP server on loopback (http.server), not a stand-in for libcurl:
the policy talks to it exactly as to vLLM or SGLang. What it answers is scripted
by the request itself: when the last message's content starts with "SCENARIO ",
the rest is a JSON object such as

    {"do": "status", "status": 429, "retry_after": 1, "times": 1, "key": "a"}

Behaviours ("do"):
  ok         200 with {"content"} (default "hello"), usage, model
  tool_call  200 with tool_calls (given, or a submit call) and content null
  logprobs   200 with per-token logprobs; "token_ids" -> choices[0].token_ids,
             "as_token_text" -> tokens written as "token_id:<n>"
  status     answer {"status"} (with Retry-After {"retry_after"} when given and
             body {"body"} or an OpenAI error object) for the first {"times"}
             requests of {"key"} (all of them without "times"), then like ok
  slow       wait {"seconds"}, then like ok
  malformed  200 with the raw text {"body"} (default: truncated JSON)
  huge       200 with {"bytes"} bytes of a JSON string; "announce": false sends
             no Content-Length (close-delimited), so only the reader's cap stops it
  deep       200 with arrays nested {"depth"} levels
  drop       close the connection without answering, {"times"} times per key
  raw_json   200 with the JSON value {"json"} as the body

GET /log returns every chat request received ({"path", "headers", "body", "t",
"key"}) and, per key, the most requests of that key that were in flight at once
("max_inflight"); POST /reset clears it. A request is in flight from its arrival
until its answer starts (or its connection is dropped): a client that sends its
next request as soon as an answer arrives must not be counted twice.
The first line on stdout is "PORT <n>". The server exits when its stdin closes,
so it never outlives the test that started it.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
LOG = []
COUNTS = {}
INFLIGHT = {}  # key -> [current, max]


def scenario_of(body):
    try:
        content = body["messages"][-1]["content"]
    except (KeyError, IndexError, TypeError):
        return {}
    if isinstance(content, str) and content.startswith("SCENARIO "):
        return json.loads(content[len("SCENARIO "):])
    return {}


def completion(body, message, finish_reason="stop", extra_choice=None):
    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    if extra_choice:
        choice.update(extra_choice)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [choice],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep the test output clean
        pass

    def send_response(self, code, message=None):
        # The answer starts: this request is no longer in flight.
        self.leave_flight()
        super().send_response(code, message)

    def leave_flight(self):
        inflight = getattr(self, "inflight", None)
        if inflight is not None:
            self.inflight = None
            with LOCK:
                inflight[0] -= 1

    def send_json(self, status, value, headers=None):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_raw(self, status, data, announce=True):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if announce:
            self.send_header("Content-Length", str(len(data)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/log":
            with LOCK:
                self.send_json(200, {"requests": LOG, "max_inflight": {k: v[1] for k, v in INFLIGHT.items()}})
        else:
            self.send_json(404, {"error": {"message": "no such path"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path == "/reset":
            with LOCK:
                LOG.clear()
                COUNTS.clear()
                INFLIGHT.clear()
            self.send_json(200, {})
            return
        if self.path != "/v1/chat/completions":
            self.send_json(404, {"error": {"message": "unknown path " + self.path}})
            return
        body = json.loads(raw)
        sc = scenario_of(body)
        key = sc.get("key", "")
        with LOCK:
            LOG.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body, "t": time.monotonic(), "key": key})
            COUNTS[key] = COUNTS.get(key, 0) + 1
            attempt = COUNTS[key]
            self.inflight = INFLIGHT.setdefault(key, [0, 0])
            self.inflight[0] += 1
            self.inflight[1] = max(self.inflight[1], self.inflight[0])
        try:
            self.answer(body, sc, attempt)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (size cap, timeout): expected in some tests
        finally:
            self.leave_flight()  # dropped without an answer

    def answer(self, body, sc, attempt):
        do = sc.get("do", "ok")
        times = sc.get("times")
        if do in ("status", "drop") and times is not None and attempt > times:
            do = "ok"
        if do == "ok":
            self.send_json(200, completion(body, {"role": "assistant", "content": sc.get("content", "hello")}))
        elif do == "slow":
            time.sleep(sc.get("seconds", 1.0))
            self.send_json(200, completion(body, {"role": "assistant", "content": sc.get("content", "slow hello")}))
        elif do == "tool_call":
            calls = sc.get("tool_calls") or [{
                "id": "call_1", "type": "function",
                "function": {"name": "submit", "arguments": json.dumps({"source": "int main() {}"})}}]
            self.send_json(200, completion(body, {"role": "assistant", "content": None, "tool_calls": calls},
                                           "tool_calls"))
        elif do == "logprobs":
            ids = sc.get("ids", [101, 102, 103])
            lps = sc.get("logprobs", [-0.5, -1.25, -0.125])
            text = sc.get("as_token_text", False)
            content = [{"token": ("token_id:%d" % i) if text else "t%d" % i, "logprob": lp, "bytes": None,
                        "top_logprobs": []} for i, lp in zip(ids, lps)]
            extra = {"logprobs": {"content": content}}
            if sc.get("token_ids"):
                extra["token_ids"] = ids
            self.send_json(200, completion(body, {"role": "assistant", "content": "abc"}, "stop", extra))
        elif do == "status":
            status = sc.get("status", 500)
            headers = {}
            if "retry_after" in sc:
                headers["Retry-After"] = str(sc["retry_after"])
            if "body" in sc:
                data = sc["body"].encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_json(status, {"error": {"message": sc.get("message", "scripted failure %d" % status),
                                                  "type": "test", "code": status}}, headers)
        elif do == "malformed":
            self.send_raw(200, sc.get("body", '{"choices": [{"message": {"content": "cut').encode())
        elif do == "huge":
            n = int(sc.get("bytes", 1 << 20))
            announce = sc.get("announce", True)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if announce:
                self.send_header("Content-Length", str(n + 2))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(b'"')
            chunk = b"x" * 65536
            left = n
            while left > 0:
                self.wfile.write(chunk[:min(left, len(chunk))])
                left -= len(chunk)
            self.wfile.write(b'"')
        elif do == "deep":
            depth = int(sc.get("depth", 100000))
            self.send_raw(200, (b"[" * depth) + (b"]" * depth))
        elif do == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
        elif do == "raw_json":
            self.send_json(200, sc["json"])
        else:
            self.send_json(400, {"error": {"message": "unknown scenario " + do}})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)

    def watch_stdin():
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
