"""`memtend eval-judge`: the configured embedder + judge scored end to end on a pairs file, one
JSON object on stdout, no Neo4j needed, offline and with the LLM judge over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mem_assets.cli import app
from mem_assets.dedup.evaluation import evaluate, read_pairs
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_resources.embedder import HashingEmbedder
from tests.support.fake_openai import chat_answer, fake_openai_server, judge_groups, verdicts

HELDOUT = Path(__file__).resolve().parents[1] / "research" / "data" / "judge" / "heldout.jsonl"
NO_NEO4J = "bolt://127.0.0.1:9"  # nothing listens: the command must not need the graph


@pytest.fixture
def offline_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_URI", NO_NEO4J)
    for name in ("MEMTEND_EMBEDDER", "MEMTEND_LLM", "MEMTEND_EMBEDDING_DIM"):
        monkeypatch.delenv(name, raising=False)


def _run(*args: str) -> tuple[int, dict[str, Any] | str]:
    result = CliRunner().invoke(app, ["eval-judge", *args])
    try:
        return result.exit_code, json.loads(result.stdout)
    except json.JSONDecodeError:
        return result.exit_code, result.output


def test_heldout_split_scores_what_evaluate_scores(offline_env, judge_heldout_score):
    code, printed = _run(str(HELDOUT))
    assert code == 0, printed
    assert printed == judge_heldout_score
    assert printed["pairs"] == len(read_pairs(HELDOUT)) >= 400
    assert {"wrong_merges", "wrong_supersedes", "confusion", "classes"} <= set(printed)


def test_threshold_top_k_and_the_configured_embedder_are_used(offline_env, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMTEND_EMBEDDER", "hashing")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps(row) for row in [
        {"a": "The user likes tea.", "b": "The user no longer drinks tea.", "label": "contradictory"},
        {"a": "The user has a dog.", "b": "The user has a dog named Rex.", "label": "redundant"},
    ]), encoding="utf-8")
    code, printed = _run(str(pairs), "--threshold", "0.05", "--top-k", "1")
    assert code == 0, printed
    expected = evaluate(read_pairs(pairs), HashingEmbedder(), OfflineJudge(), 0.05, 1)
    assert printed == expected and printed["threshold"] == 0.05 and printed["top_k"] == 1
    assert printed["embedder"] == "HashingEmbedder"


def test_a_malformed_pairs_file_is_a_clear_error(offline_env, tmp_path):
    pairs = tmp_path / "bad.jsonl"
    pairs.write_text('{"a": "x", "b": "y", "label": "same"}\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["eval-judge", str(pairs)])
    assert result.exit_code == 2 and "need a, b and label" in result.output


def test_with_the_llm_judge_over_http(offline_env, monkeypatch, tmp_path):
    rows = [
        {"a": "The user lives in Berlin.", "b": "The user lives in Paris.", "label": "contradictory"},
        {"a": "The user has two cats.", "b": "The user lives in Paris.", "label": "independent"},
        {"a": "The user has two cats.", "b": "The user has two cats, Luna and Milo.", "label": "redundant"},
    ]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")

    def chat(body: dict) -> tuple[int, Any]:
        return 200, chat_answer(verdicts(
            body, lambda new, c: "Contradiction" if "lives" in new and "lives" in c["text"] else
            "duplicate" if "cats" in new and "cats" in c["text"] else "unrelated", "rule"))

    with fake_openai_server() as server:
        server.chat = chat
        monkeypatch.setenv("MEMTEND_LLM", "openai")
        monkeypatch.setenv("MEMTEND_LLM_ROUTE", "all")
        monkeypatch.setenv("MEMTEND_EMBEDDER", "hashing")
        monkeypatch.setenv("MEMTEND_LLM_MODEL", "test-model")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        code, printed = _run(str(pairs), "--threshold", "0.0")
        calls = server.chat_calls()
        keys = {value for headers in server.headers for name, value in headers.items()
                if name.lower() == "authorization"}

    assert code == 0, printed
    assert printed["judge"].startswith("openai:test-model:v2") and printed["judge_failures"] == 0
    assert printed["accuracy"] == 1.0
    assert printed["judge_calls"] == len(calls) == 1  # both newer memories in one call
    assert sum(len(judge_groups(body) or []) for body in calls) == 2  # one group per distinct newer memory
    assert keys == {"Bearer sk-test"}  # the key itself, not the name of its variable
