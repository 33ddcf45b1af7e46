"""The chat client against servers people self-host, over real HTTP to the local fake server: a
refused response format (whatever the status, e.g. llama-cpp-python's HTTP 500 on ``json_schema``)
steps down to ``json_object`` with the schema, then to none, and the client keeps what worked;
overload and auth errors are not mistaken for a refusal; every request bounds its answer with
``max_tokens``."""

from __future__ import annotations

import json
from typing import Any

from mem_assets.dedup.llm_judge_prompt import GroupVerdict, JudgeRequest, MemoryRef, verdict_schema
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.reorg.summarizers import LLMSummarizer, SummaryRequest, TopicSummary
from mem_assets.reorg.summarizers import answer_schema as topics_schema
from mem_assets.resources import build_chat
from mem_resources.llm import OpenAIChatResource
from mem_resources.settings import Settings
from tests.support.fake_openai import chat_answer, fake_openai_server

REQUEST = JudgeRequest(MemoryRef("The user now lives in Paris."),
                       (MemoryRef("The user lives in Berlin."), MemoryRef("The user has two cats.")),
                       ("older", "older"))
GOOD = json.dumps({"judgments": [{"id": 1, "reason": "a move", "relation": "contradictory"},
                                 {"id": 2, "reason": "unrelated", "relation": "independent"}]})
#: What llama-cpp-python's server (0.3.x) answers to ``response_format: {"type": "json_schema"}``.
LLAMA_CPP_500 = {"error": {"message": "1 validation error for CreateChatCompletionRequest\nresponse_format"
                                      ".type\n  Input should be 'text' or 'json_object'", "type": "internal_server_error"}}


def _chat(base_url: str, **options: Any) -> OpenAIChatResource:
    return OpenAIChatResource(base_url=base_url, model="test-model", timeout_s=5.0, max_retries=0, **options)


def _format(body: dict) -> str | None:
    return body.get("response_format", {}).get("type")


def _llama_cpp_like(answer: str):
    """500 on json_schema; json_object only with a schema (else it would echo the request)."""
    def chat(body: dict) -> tuple[int, Any]:
        kind = _format(body)
        if kind == "json_schema":
            return 500, LLAMA_CPP_500
        if kind == "json_object" and "schema" not in body["response_format"]:
            return 200, chat_answer(body["messages"][1]["content"])
        return 200, chat_answer(answer)
    return chat


def test_a_500_on_json_schema_falls_back_to_json_object_with_the_schema_and_is_remembered():
    chat = _chat("", max_tokens=300)
    with fake_openai_server() as server:
        server.chat = _llama_cpp_like(GOOD)
        judge = OpenAIJudge(chat=chat.model_copy(update={"base_url": server.base_url}), max_concurrency=1,
                            memories_per_call=1)
        results, usage = judge.judge_requests([REQUEST, REQUEST])
        bodies = server.chat_calls()
    assert [[j.label for j in judged] for judged in results] == [["contradictory", "independent"]] * 2
    assert not any(j.failed for judged in results for j in judged)
    assert [_format(b) for b in bodies] == ["json_schema", "json_object", "json_object"]
    assert bodies[1]["response_format"]["schema"] == verdict_schema(2)  # exactly one verdict per candidate
    assert all(b["max_tokens"] == 300 for b in bodies)
    assert (usage.calls, usage.failures, usage.unparsable) == (3, 0, 0)


def test_a_server_refusing_both_structured_formats_is_asked_plainly_from_then_on():
    def chat(body: dict) -> tuple[int, Any]:
        if body.get("response_format"):
            return 422, {"error": {"message": "unsupported parameter"}}
        return 200, chat_answer(f"Here you go: {GOOD}")

    with fake_openai_server() as server:
        server.chat = chat
        chat_resource = _chat(server.base_url)
        first, _ = chat_resource.ask_json("system", "user", GroupVerdict, context={"candidates": 2})
        second, _ = chat_resource.ask_json("system", "user", GroupVerdict, context={"candidates": 2})
        formats = [_format(b) for b in server.chat_calls()]
    assert first is not None and second is not None
    assert formats == ["json_schema", "json_object", None, None]
    assert chat_resource.working_format == "none"


def test_a_configured_json_object_starts_there_with_the_schema():
    with fake_openai_server() as server:
        server.chat = _llama_cpp_like(json.dumps({"key": "Pets", "value": "The user's pets."}))
        named = LLMSummarizer(chat=_chat(server.base_url, response_format="json_object")).summarize([SummaryRequest(
            ["The user has two cats.", "The user walks the dog."], TopicSummary(key="pets", value="pets"), "en")])
        [body] = server.chat_calls()
    assert named.summaries[0] is not None and named.summaries[0].key == "Pets"
    assert body["response_format"] == {"type": "json_object", "schema": topics_schema(["t1"])}
    assert body["max_tokens"] == 1024 and named.usage.calls == 1


def test_a_server_failing_every_format_is_one_counted_failure_and_keeps_its_best_format(caplog):
    with fake_openai_server() as server:
        server.chat = lambda body: (500, {"error": {"message": "model crashed"}})
        chat = _chat(server.base_url)
        answer, usage = chat.ask_json("system", "user", GroupVerdict, context={"candidates": 2})
        server.chat = lambda body: (200, chat_answer(GOOD))
        healed, _ = chat.ask_json("system", "user", GroupVerdict, context={"candidates": 2})
        formats = [_format(b) for b in server.chat_calls()]
    assert answer is None and usage.failures == 1 and usage.failure_kinds == {"http_status": 1}
    assert "HTTP 500" in caplog.text and "model crashed" in caplog.text
    assert healed is not None
    assert formats == ["json_schema", "json_object", None, "json_schema"]


def test_overload_and_auth_errors_are_not_taken_for_a_refused_format():
    for status in (401, 429, 503):
        with fake_openai_server() as server:
            server.chat = lambda body, status=status: (status, {"error": {"message": "busy or bad key"}})
            chat = _chat(server.base_url)
            answer, usage = chat.ask_json("system", "user", GroupVerdict, context={"candidates": 2})
            formats = [_format(b) for b in server.chat_calls()]
        assert answer is None and usage.failure_kinds == {"http_status": 1}
        assert formats == ["json_schema"] and chat.working_format is None


def test_max_tokens_is_a_setting():
    assert build_chat(Settings(llm_max_tokens=200), in_dagster=False).max_tokens == 200
    assert build_chat(Settings(), in_dagster=False).max_tokens == 1024
