"""The research oracle (research/oracle/server.py) over real HTTP: memtend's own LLM judge asks
it, and it answers each candidate from the labeled pairs; the 15 %-wrong variant is wrong about
15 % of the time, and the same way on every run."""

from __future__ import annotations

import json
from pathlib import Path

import openai

from mem_assets.dedup.llm_judge_prompt import JudgeRequest, MemoryRef
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_resources.llm import OpenAIChatResource
from research.oracle.server import oracle_server

LABELS = ("redundant", "contradictory", "independent")


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), "utf-8")
    return path


def _judge(base_url: str) -> OpenAIJudge:
    return OpenAIJudge(chat=OpenAIChatResource(base_url=base_url, model="oracle", max_retries=0),
                       offline_veto=False, max_concurrency=2)


def test_the_oracle_answers_memtends_judge_from_the_labels(tmp_path):
    pairs = _write(tmp_path / "pairs.jsonl", [
        {"a": "Anna lives in Berlin.", "b": "Anna now lives in Paris.", "label": "contradictory"},
        {"a": "Anna jogs to unwind.", "b": "Anna now lives in Paris.", "label": "independent"},
        {"a": "Anna goes running to clear her head.", "b": "Anna jogs to unwind.", "label": "redundant"}])
    with oracle_server(pairs=[pairs]) as oracle:
        request = JudgeRequest(MemoryRef("Anna now lives in Paris."),
                               (MemoryRef("Anna lives in Berlin."), MemoryRef("Anna jogs to unwind."),
                                MemoryRef("Anna has a cat.")), ("older",) * 3)
        [judged], usage = _judge(oracle.base_url).judge_requests([request])
        [[redundant]], _ = _judge(oracle.base_url).judge_requests([JudgeRequest(
            MemoryRef("Anna jogs to unwind."), (MemoryRef("Anna goes running to clear her head."),), ("older",))])
        fused = openai.OpenAI(base_url=oracle.base_url, api_key="x").chat.completions.create(
            model="oracle", messages=[{"role": "user", "content": json.dumps({"relation": "redundant", "memories": [
                {"id": 1, "text": "Anna jogs."}, {"id": 2, "text": "Anna jogs to unwind after work."}]})}])
    assert [j.label for j in judged] == ["contradictory", "independent", "independent"]  # unlabeled: independent
    assert redundant.label == "redundant"
    assert usage.calls == 1 and usage.prompt_tokens > 100 and usage.completion_tokens > 10
    assert json.loads(fused.choices[0].message.content)["merged"] == "Anna jogs to unwind after work."
    assert oracle.oracle.calls == {"judge": 2, "fuse": 1}


def test_the_wrong_variant_is_wrong_about_15_percent_and_deterministic(tmp_path):
    rows = [{"a": f"Memory number {i} about thing {i % 7}.", "b": f"New memory {i // 4} on topic {i % 5}.",
             "label": LABELS[i % 3]} for i in range(600)]
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    truth = [r["label"] for r in rows]
    answers = []
    for _ in range(2):
        with oracle_server(pairs=[pairs], wrong=0.15, seed=7) as oracle:
            judged, _ = _judge(oracle.base_url).judge_pairs([(r["a"], r["b"]) for r in rows])
            answers.append([j.label for j in judged])
            assert oracle.oracle.decisions["judge"] == len(rows)
    with oracle_server(pairs=[pairs], wrong=0.15, seed=8) as oracle:
        other_seed = [j.label for j in _judge(oracle.base_url).judge_pairs([(r["a"], r["b"]) for r in rows])[0]]
    wrong = sum(a != t for a, t in zip(answers[0], truth, strict=True)) / len(rows)
    assert answers[0] == answers[1]
    assert 0.11 <= wrong <= 0.19
    assert other_seed != answers[0]
    wrong_labels = {a for a, t in zip(answers[0], truth, strict=True) if a != t}
    assert wrong_labels == set(LABELS)  # a wrong answer is any other label
