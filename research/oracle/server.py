"""An OpenAI-compatible chat-completions server that answers memtend's requests from labels.

It stands in for a model whose quality is known: the judge's relation for each candidate is the
label of the (candidate, new memory) pair in the labeled pairs (independent when unlabeled); a
fusion keeps the most informative source verbatim (a contradiction is left unreconciled, the newer
wins); a topic placement picks the offered topic whose examples' majority label is the memory's
label, else "new"; a topic summary is named after its members' majority label. With ``wrong`` > 0
each decision is replaced, with that probability, by a uniformly chosen other one; which decisions
are wrong depends only on ``seed`` and the texts decided (a sha256), so a rerun — or the same pair
in another request grouping — gets the same answer. Usage tokens are counted like a real server's
(about four characters a token).

Labeled files: judge pairs ``{"a", "b", "label"}`` JSONL; topic items ``{"text", "topic"}`` JSONL.

    with oracle_server(pairs=[Path("heldout.jsonl")], wrong=0.15, seed=1) as oracle:
        ...  # MEMTEND_LLM=openai OPENAI_BASE_URL=oracle.base_url

    python -m research.oracle.server --pairs heldout.jsonl --topics topics.jsonl --port 8099
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RELATIONS = ("redundant", "contradictory", "independent")


def _key(text: str) -> str:
    return " ".join(text.split())


def _read_jsonl(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        for line in Path(path).read_text("utf-8").splitlines():
            if line.strip():
                yield json.loads(line)


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _informativeness(text: str) -> tuple[int, int]:
    return len(re.findall(r"\w+", text)), len(text)


@dataclass
class Oracle:
    """The answers, from labels; thread-safe counters of what was asked and answered."""

    pair_labels: dict[frozenset[str], str] = field(default_factory=dict)
    topic_of: dict[str, str] = field(default_factory=dict)
    wrong: float = 0.0
    seed: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)
    """Decisions made, by kind, and how many of them were made wrong (``<kind>_wrong``)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_files(cls, pairs: Sequence[Path] = (), topics: Sequence[Path] = (), wrong: float = 0.0,
                   seed: int = 0) -> Oracle:
        labels = {frozenset((_key(r["a"]), _key(r["b"]))): r["label"] for r in _read_jsonl(pairs)}
        topic_of: dict[str, str] = {}
        for row in _read_jsonl(topics):
            topic_of.setdefault(_key(row["text"]), str(row["topic"]))
        return cls(labels, topic_of, wrong, seed)

    # --- deterministic mistakes

    def _draw(self, *parts: str) -> float:
        digest = hashlib.sha256("\x1f".join((str(self.seed), *parts)).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def _maybe_wrong(self, kind: str, truth: str, others: Sequence[str], *texts: str) -> str:
        """``truth``, or with probability ``wrong`` one of ``others`` (those != truth) uniformly."""
        with self.lock:
            self.decisions[kind] += 1
        choices = [o for o in others if o != truth]
        if not self.wrong or not choices or self._draw(kind, *sorted(texts)) >= self.wrong:
            return truth
        with self.lock:
            self.decisions[f"{kind}_wrong"] += 1
        return choices[int(self._draw("which", kind, *sorted(texts)) * len(choices))]

    # --- the request kinds

    def relation(self, a: str, b: str) -> str:
        return self.pair_labels.get(frozenset((_key(a), _key(b))), "independent")

    def judge(self, data: dict[str, Any]) -> dict[str, Any]:
        judgments = []
        for group in data.get("groups", [data]):
            new = group["new_memory"]["text"]
            for candidate in group.get("candidates", []):
                truth = self.relation(candidate["text"], new)
                said = self._maybe_wrong("judge", truth, RELATIONS, candidate["text"], new)
                judgments.append({"id": candidate["id"], "reason": f"labeled {truth}" if said == truth
                                  else "oracle answering wrongly", "relation": said})
        return {"judgments": judgments}

    def fuse(self, data: dict[str, Any]) -> dict[str, Any]:
        texts = [m["text"] for m in data["memories"]]
        if data.get("relation") == "contradictory":
            return {"reason": "they cannot both hold: the newest replaces the others",
                    "reconcilable": False, "merged": None}
        return {"reason": "the most informative memory states them all", "reconcilable": True,
                "merged": max(texts, key=_informativeness)}

    def _label(self, text: str) -> str | None:
        return self.topic_of.get(_key(text))

    def _place(self, memory: str, topics: Sequence[dict[str, Any]]) -> Any:
        label = self._label(memory)
        offered = [t["id"] for t in topics]
        truth: Any = "new"
        for topic in topics:
            votes = Counter(x for x in (self._label(e) for e in topic.get("examples", [])) if x)
            if label is not None and votes and votes.most_common(1)[0][0] == label:
                truth = topic["id"]
                break
        options = [*offered, "new"]
        said = self._maybe_wrong("place", json.dumps(truth), [json.dumps(o) for o in options], memory)
        return json.loads(said)

    def place(self, data: dict[str, Any]) -> dict[str, Any]:
        topics = data.get("topics", [])
        if "memories" in data:
            return {"choices": [{"memory": i, "choice": self._place(text, topics)}
                                for i, text in enumerate(self._texts(data["memories"]))]}
        return {"choice": self._place(self._texts([data["memory"]])[0], topics)}

    def summarize(self, data: dict[str, Any]) -> dict[str, Any]:
        if "topics" in data:
            return {"topics": [{"id": topic["id"], **self.summarize(topic)} for topic in data["topics"]]}
        texts = self._texts(data.get("memories", []))
        votes = Counter(x for x in map(self._label, texts) if x)
        name = (votes.most_common(1)[0][0].replace("_", " ") if votes
                else " ".join(re.findall(r"\w+", max(texts, key=len, default="memories"))[:3]))
        return {"key": name, "value": f"{len(texts)} memories about {name}.", "tags": [name][:5],
                "background": f"They are all about {name}.", "name": name,
                "summary": f"{len(texts)} memories about {name}."}

    @staticmethod
    def _texts(items: Sequence[Any]) -> list[str]:
        return [item if isinstance(item, str) else str(item.get("text", "")) for item in items]

    def answer(self, body: dict[str, Any]) -> tuple[str, str]:
        """(kind, answer text) for a chat-completions request body."""
        messages = body.get("messages", [])
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in messages if m.get("role") == "user"), "{}")
        data = json.loads(user)
        if "groups" in data or "new_memory" in data:
            kind, answer = "judge", self.judge(data)
        elif "relation" in data and "memories" in data:
            kind, answer = "fuse", self.fuse(data)
        elif "topics" in data and ("memory" in data or "memories" in data):
            kind, answer = "place", self.place(data)
        elif "memories" in data or "topic" in system.lower():
            kind, answer = "summarize", self.summarize(data)
        else:
            raise ValueError("not a request memtend makes")
        return kind, json.dumps(answer, ensure_ascii=False)

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        kind, content = self.answer(body)
        prompt = sum(_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
        completion = _tokens(content)
        with self.lock:
            self.calls[kind] += 1
            self.prompt_tokens += prompt
            self.completion_tokens += completion
        return {"id": f"chatcmpl-oracle-{sum(self.calls.values())}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", "oracle"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}


@dataclass
class OracleServer:
    oracle: Oracle
    httpd: ThreadingHTTPServer

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"


def _handler(oracle: Oracle) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # the name http.server calls
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "oracle", "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # the name http.server calls
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            try:
                self._send(200, oracle.completion(body))
            except (ValueError, KeyError, TypeError) as exc:
                self._send(400, {"error": {"message": f"oracle cannot answer: {exc}"}})

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def oracle_server(pairs: Sequence[Path] = (), topics: Sequence[Path] = (), wrong: float = 0.0, seed: int = 0,
                  host: str = "127.0.0.1", port: int = 0) -> Iterator[OracleServer]:
    """Serve the oracle on ``host:port`` (0: a free port) until the block ends."""
    oracle = Oracle.from_files(pairs, topics, wrong, seed)
    httpd = ThreadingHTTPServer((host, port), _handler(oracle))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="oracle", daemon=True)
    thread.start()
    try:
        yield OracleServer(oracle, httpd)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, action="append", default=[], help="judge pairs JSONL (repeatable)")
    parser.add_argument("--topics", type=Path, action="append", default=[], help="topic items JSONL (repeatable)")
    parser.add_argument("--wrong", type=float, default=0.0, help="share of decisions answered wrongly")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    args = parser.parse_args(argv)
    with oracle_server(args.pairs, args.topics, args.wrong, args.seed, args.host, args.port) as server:
        print(f"oracle on {server.base_url} ({len(server.oracle.pair_labels)} labeled pairs, "
              f"{len(server.oracle.topic_of)} topic items, wrong {args.wrong}, seed {args.seed}); Ctrl-C stops",
              flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        print(json.dumps({"calls": server.oracle.calls, "decisions": server.oracle.decisions,
                          "prompt_tokens": server.oracle.prompt_tokens,
                          "completion_tokens": server.oracle.completion_tokens}))


if __name__ == "__main__":
    main()
