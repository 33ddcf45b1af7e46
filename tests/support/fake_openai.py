"""A local HTTP server speaking the OpenAI chat-completions and embeddings protocol.

Tests script its answers with a handler; the real ``openai`` SDK talks to it over HTTP. Besides
JSON bodies a handler can return a raw string (sent as is), a ``Truncated`` body (the connection
closes before the announced length), or call ``hang()`` to model a server that never answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Truncated:
    """A body cut short: the server announces more bytes than it sends, then closes."""

    body: str
    content_type: str = "application/json"


@dataclass(frozen=True)
class Raw:
    """A body sent exactly as given, with its own content type."""

    body: str
    content_type: str = "text/html"


#: Given the parsed request body, return (HTTP status, response body as dict, str, Raw or Truncated).
Handler = Callable[[dict[str, Any]], tuple[int, "dict[str, Any] | str | Raw | Truncated"]]


def judge_candidates(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """(its group's new memory text, candidate) for every candidate of a judge request, in id
    order; None for any other request."""
    data = json.loads(body["messages"][1]["content"])
    if "groups" not in data:
        return None
    return [(group["new_memory"]["text"], c) for group in data["groups"] for c in group["candidates"]]


def judge_groups(body: dict[str, Any]) -> list[tuple[str, frozenset[str]]] | None:
    """(new memory text, its candidates' texts) per group of a judge request; None for any other."""
    data = json.loads(body["messages"][1]["content"])
    if "groups" not in data:
        return None
    return [(group["new_memory"]["text"], frozenset(c["text"] for c in group["candidates"]))
            for group in data["groups"]]


def verdicts(body: dict[str, Any], relation: Callable[[str, dict[str, Any]], str], reason: str = "scripted") -> str:
    """A judge answer: ``relation(new memory text, candidate)`` for every candidate of ``body``."""
    return json.dumps({"judgments": [{"id": c["id"], "reason": reason, "relation": relation(new, c)}
                                     for new, c in judge_candidates(body) or []]})


def chat_answer(content: str, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def embeddings_answer(vectors: list[list[float]]) -> dict[str, Any]:
    return {"object": "list", "model": "test-embedding",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": 1, "total_tokens": 1}}


@dataclass
class FakeOpenAI:
    base_url: str
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    chat: Handler = lambda body: (200, chat_answer("{}"))
    embeddings: Handler = lambda body: (200, embeddings_answer([[1.0] for _ in body["input"]]))
    released: threading.Event = field(default_factory=threading.Event)

    def hang(self, seconds: float = 60.0) -> tuple[int, dict[str, Any]]:
        """Answer nothing until the server shuts down (or ``seconds`` pass): a hung model."""
        self.released.wait(seconds)
        return 503, {"error": {"message": "hung"}}

    def chat_calls(self) -> list[dict[str, Any]]:
        return [body for path, body in self.requests if path.endswith("/chat/completions")]


@contextmanager
def fake_openai_server() -> Iterator[FakeOpenAI]:
    """Serve on 127.0.0.1 on a free port; ``base_url`` ends in ``/v1`` like the real API."""
    state = FakeOpenAI(base_url="")

    class _Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append((self.path, body))
            state.headers.append(dict(self.headers))
            if self.path.endswith("/chat/completions"):
                status, payload = state.chat(body)
            elif self.path.endswith("/embeddings"):
                status, payload = state.embeddings(body)
            else:
                status, payload = 404, {"error": {"message": f"no route {self.path}"}}
            content_type = getattr(payload, "content_type", "application/json")
            if isinstance(payload, Raw | Truncated):
                raw = payload.body
            else:
                raw = payload if isinstance(payload, str) else json.dumps(payload)
            announced = len(raw.encode()) + (64 if isinstance(payload, Truncated) else 0)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(announced))
            self.end_headers()
            self.wfile.write(raw.encode())
            if isinstance(payload, Truncated):
                self.wfile.flush()
                self.close_connection = True

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
