"""Reading a chat model's answer as JSON, tolerantly: models wrap JSON in prose, code fences or a
leading ``<think>…</think>`` block even when asked not to, and an answer is worth keeping if the
JSON inside it is valid."""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)


class UnparsableAnswer(ValueError):
    """The answer holds no JSON object or array."""


def strip_reasoning(text: str) -> str:
    """Drop a leading ``<think>…</think>`` block; an unclosed one means the answer was cut off."""
    stripped = _THINK.sub("", text, count=1)
    if stripped.lstrip().lower().startswith("<think>"):
        raise UnparsableAnswer("the answer is only an unfinished <think> block")
    return stripped


def extract_json(text: str | None) -> Any:
    """The answer's JSON: the whole text, else the first fenced block, else the first object or
    array that decodes, scanning left to right."""
    if not text or not text.strip():
        raise UnparsableAnswer("empty answer")
    body = strip_reasoning(text).strip()
    for candidate in (body, *_FENCED.findall(body)):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for start, char in enumerate(body):
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(body, start)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict | list):
                return value
    raise UnparsableAnswer(f"no JSON object in the answer {body[:80]!r}")
