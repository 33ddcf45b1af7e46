"""OpenAI-compatible chat client that returns pydantic-validated JSON, or None when it cannot.

Every failure of a call — transport, HTTP status, an HTTP 200 whose body is not a chat completion
(not JSON, truncated, wrong shape), an answer with no JSON in it, JSON that fails the schema — is
reported as ``(None, usage)`` with its kind counted, never raised: the caller decides what a
failure means (for the judge: nothing merged, the node stays unchecked).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from dagster import ConfigurableResource
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from mem_resources.llm_answers import UnparsableAnswer, extract_json

if TYPE_CHECKING:
    import openai
    from openai import OpenAI

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
FailureKind = Literal["transport", "timeout", "http_status", "bad_body", "unparsable", "schema"]
#: Failures of the answer itself: worth one more try. Transport and status errors were already
#: retried with backoff by the SDK.
ANSWER_FAILURES = frozenset({"bad_body", "unparsable", "schema"})
RETRY_PROMPT = ("Your previous answer could not be used ({error}). Answer again with only the JSON "
                "object the instructions describe, nothing else.")
_FORMATS = ("json_schema", "json_object", "none")


@dataclass
class ChatUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    unparsable: int = 0
    deferred: int = 0
    failure_kinds: Counter[str] = field(default_factory=Counter)

    def add(self, other: ChatUsage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failures += other.failures
        self.retries += other.retries
        self.unparsable += other.unparsable
        self.deferred += other.deferred
        self.failure_kinds.update(other.failure_kinds)


@dataclass
class CallBudget:
    """A run's LLM budget (0: no limit), shared by the domains that ask a model (the dedup judge,
    topic placement). A request starts only while calls made plus calls in flight are under
    ``calls`` and tokens spent are under ``tokens``; what a started request spends (its one retry,
    its tokens) is counted when it ends, so the token limit, and with a retry the call limit, can
    be passed by what requests already in flight spend."""

    calls: int
    tokens: int
    spent_calls: int = 0
    spent_tokens: int = 0
    in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> bool:
        with self.lock:
            if ((self.calls and self.spent_calls + self.in_flight >= self.calls)
                    or (self.tokens and self.spent_tokens >= self.tokens)):
                return False
            self.in_flight += 1
            return True

    def settle(self, usage: ChatUsage) -> None:
        with self.lock:
            self.in_flight -= 1
            self.spent_calls += usage.calls
            self.spent_tokens += usage.prompt_tokens + usage.completion_tokens

    def left(self, prefix: str) -> dict[str, int | str]:
        """What is left of it, as run metadata (``budget_left``)."""
        with self.lock:
            return budget_left(prefix, self.calls, self.tokens, self.spent_calls, self.spent_tokens)


def budget_left(prefix: str, calls: int, tokens: int, spent_calls: int, spent_tokens: int) -> dict[str, int | str]:
    """``<prefix>_calls_left`` / ``<prefix>_tokens_left`` for run metadata; a limit of 0 is "no limit"."""
    return {f"{prefix}_calls_left": max(calls - spent_calls, 0) if calls else "no limit",
            f"{prefix}_tokens_left": max(tokens - spent_tokens, 0) if tokens else "no limit"}


class CallFailed(Exception):
    def __init__(self, kind: FailureKind, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def _response_content(response: Any) -> str:
    """The first choice's text; anything else the SDK handed back is a broken body."""
    choices = getattr(response, "choices", None)
    if not isinstance(response, BaseModel) or not choices:
        raise CallFailed("bad_body", f"not a chat completion: {str(response)[:120]!r}")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    if not isinstance(content, str):
        raise CallFailed("bad_body", "the completion has no text content")
    return content


#: Statuses that say nothing about the request's form: auth, routing, size, overload. Any other
#: 4xx/5xx to a request with a response format may be the server refusing that format
#: (llama-cpp-python's server answers ``json_schema`` with HTTP 500), so the next format is tried.
_NOT_ABOUT_FORMAT = frozenset({401, 402, 403, 404, 408, 409, 413, 429, 502, 503, 504})


def _maybe_format_refused(exc: openai.APIStatusError) -> bool:
    return exc.status_code >= 400 and exc.status_code not in _NOT_ABOUT_FORMAT


#: String bounds a grammar-constrained server (llama.cpp) unrolls into one rule per character: a
#: 2,000-character limit fails its grammar parser and took llama-cpp-python's server down with it.
#: The answer is validated against the full model anyway, and ``max_tokens`` bounds its length.
_UNROLLED_BOUNDS = frozenset({"maxLength", "minLength"})


def answer_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema``'s JSON schema as sent to the server: without string length bounds."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: strip(value) for key, value in node.items() if key not in _UNROLLED_BOUNDS}
        return [strip(item) for item in node] if isinstance(node, list) else node

    return strip(schema.model_json_schema())


class OpenAIChatResource(ConfigurableResource):
    """Chat completions with a per-request timeout, the SDK's backoff retries on 408/429/5xx and
    lost connections (``max_retries``), and answers bounded by ``max_tokens``.

    Servers people self-host differ in the structured output they accept, so the response format
    steps down ``json_schema`` -> ``json_object`` with the schema (grammar-constrained on
    llama.cpp servers) -> none when a request is refused, and the client remembers the first one
    that worked for the rest of its life."""

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str = "not-needed"
    timeout_s: float = 60.0
    max_retries: int = 2
    temperature: float = 0.0
    max_tokens: int = Field(default=1024, ge=16, description="Completion tokens one answer may take.")
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"

    _working_format: str | None = PrivateAttr(default=None)

    def client(self) -> OpenAI:
        """The SDK is imported here, not at module load: every run process would pay ~1 s for
        it, and offline runs never call it."""
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key,
                      timeout=self.timeout_s, max_retries=self.max_retries)

    @property
    def working_format(self) -> str | None:
        """The response format the server last accepted, None before any answer."""
        return self._working_format

    def _formats(self) -> list[str]:
        """The formats to try in order: the one that worked, else the configured one and weaker."""
        start = self._working_format or self.response_format
        return list(_FORMATS[_FORMATS.index(start):])

    @staticmethod
    def _format_body(name: str, schema: type[BaseModel], sent: dict[str, Any] | None) -> dict[str, Any] | None:
        if name == "json_schema":
            return {"type": "json_schema", "json_schema": {
                "name": schema.__name__, "schema": sent or answer_schema(schema), "strict": False}}
        if name == "json_object":
            return {"type": "json_object", "schema": sent or answer_schema(schema)}
        return None

    def _create(self, client: OpenAI, messages: list[dict[str, str]], schema: type[BaseModel],
                usage: ChatUsage, sent: dict[str, Any] | None = None) -> str:
        """One completion's text. A 4xx/5xx that may be a refused response format is sent again
        with the next weaker format; the format that answered is kept for later calls. When every
        format fails, the first failure is reported and nothing is remembered (a server that
        is merely broken does not lose its best format)."""
        import openai

        formats = self._formats()
        first: CallFailed | None = None
        for position, name in enumerate(formats):
            response_format = self._format_body(name, schema, sent)
            extra = {"response_format": response_format} if response_format else {}
            usage.calls += 1
            try:
                response = client.chat.completions.create(
                    model=self.model, temperature=self.temperature, max_tokens=self.max_tokens,
                    messages=messages, **extra)
            except openai.APIStatusError as exc:
                failure = CallFailed("http_status", f"HTTP {exc.status_code}: {exc.message}")
                first = first or failure
                if response_format and _maybe_format_refused(exc) and position + 1 < len(formats):
                    log.warning("The server answered response_format %s with HTTP %s (refused?); "
                                "trying %s", name, exc.status_code, formats[position + 1])
                    continue
                raise first from exc
            except openai.APITimeoutError as exc:
                if position:  # the server took this format and was slow: no need to probe again
                    self._working_format = name
                raise CallFailed("timeout", f"no answer within {self.timeout_s} s") from exc
            except openai.APIError as exc:
                raise CallFailed("transport", f"{type(exc).__name__}: {exc}") from exc
            except Exception as exc:
                raise CallFailed("bad_body", f"{type(exc).__name__}: {exc}") from exc
            self._working_format = name
            if getattr(response, "usage", None) is not None:
                usage.prompt_tokens += response.usage.prompt_tokens or 0
                usage.completion_tokens += response.usage.completion_tokens or 0
            return _response_content(response)
        raise AssertionError("unreachable")

    def ask_json(self, system: str, user: str, schema: type[T], client: OpenAI | None = None,
                 context: dict[str, Any] | None = None,
                 deadline: float | None = None,
                 sent_schema: dict[str, Any] | None = None,
                 budget: CallBudget | None = None) -> tuple[T | None, ChatUsage]:
        """Ask once; an answer that cannot be read or fails ``schema`` (validated with
        ``context``) is asked for once more, unless ``deadline`` (time.monotonic) has passed.
        ``sent_schema``: the JSON schema to send instead of ``schema``'s, e.g. one fitted to this
        request (a grammar-constrained server then cannot answer in another shape). ``budget``: no
        call when it is spent (``usage.deferred`` 1), else what the call spends is counted there."""
        if budget is not None and not budget.take():
            return None, ChatUsage(deferred=1)
        usage = ChatUsage()
        try:
            return self._ask_json(system, user, schema, client or self.client(), usage, context, deadline,
                                  sent_schema)
        finally:
            if budget is not None:
                budget.settle(usage)

    def _ask_json(self, system: str, user: str, schema: type[T], client: OpenAI, usage: ChatUsage,
                  context: dict[str, Any] | None, deadline: float | None,
                  sent_schema: dict[str, Any] | None) -> tuple[T | None, ChatUsage]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        for attempt in (1, 2):
            content = ""
            try:
                content = self._create(client, messages, schema, usage, sent_schema)
                try:
                    return schema.model_validate(extract_json(content), context=context), usage
                except UnparsableAnswer as exc:
                    raise CallFailed("unparsable", str(exc)) from exc
                except ValidationError as exc:
                    raise CallFailed("schema", f"{exc.error_count()} error(s): "
                                     f"{exc.errors(include_url=False)[0]['msg']}") from exc
            except CallFailed as failure:
                if failure.kind in ("unparsable", "schema"):
                    usage.unparsable += 1
                late = deadline is not None and time.monotonic() >= deadline
                if failure.kind not in ANSWER_FAILURES or attempt == 2 or late:
                    usage.failures += 1
                    usage.failure_kinds[failure.kind] += 1
                    log.warning("LLM call failed (%s); answer was %.200r", failure, content)
                    return None, usage
                usage.retries += 1
                if content:
                    messages = [*messages[:2], {"role": "assistant", "content": content[:4000]},
                                {"role": "user", "content": RETRY_PROMPT.format(error=failure)}]
        raise AssertionError("unreachable")
