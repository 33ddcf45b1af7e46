"""``memtend eval-topics --llm``'s path: placement revised by an LLM, here a local OpenAI-compatible
server answering from the labels of tuning data (research/data/eval/topics.jsonl). No Neo4j."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mem_assets.reorg.evaluation import evaluate_topics, read_items
from mem_assets.reorg.llm_placement import NEW, LLMPlacer
from mem_assets.reorg.placement import PlacementParams
from mem_assets.reorg.topic_space import language
from mem_resources.embedder import WordLlamaEmbedder
from mem_resources.llm import OpenAIChatResource
from tests.support.fake_openai import chat_answer

ITEMS = Path(__file__).resolve().parents[2] / "research" / "data" / "eval" / "topics.jsonl"


def test_a_label_oracle_places_the_uncertain_memories_and_purity_does_not_drop(model):
    english = [item for item in read_items(ITEMS) if language(item.text) == "en"]
    themes = sorted({item.topic for item in english})[:14]
    items = [item for item in english if item.topic in themes]
    label = {item.text: item.topic for item in items}

    def oracle(body):
        payload = json.loads(body["messages"][1]["content"])
        theme = {t["id"]: Counter(label.get(text) for text in t["examples"]).most_common(1)[0][0]
                 for t in payload["topics"]}
        return 200, chat_answer(json.dumps({"choices": [
            {"memory": i, "choice": next((tid for tid, of in theme.items() if of == label[text]), NEW)}
            for i, text in enumerate(payload["memories"])]}))

    model.chat = oracle
    embedder = WordLlamaEmbedder()
    offline = evaluate_topics(items, embedder, PlacementParams())
    advisor = LLMPlacer(chat=OpenAIChatResource(base_url=model.base_url, max_retries=0)).advisor()
    assert advisor is not None
    revised = evaluate_topics(items, embedder, PlacementParams(), advisor=advisor)

    figures = advisor.metadata()
    assert figures["llm_placement_routed"] > 0 and figures["llm_placement_calls"] == len(model.chat_calls())
    assert figures["llm_placement_calls"] < figures["llm_placement_routed"]  # batched
    assert figures["llm_placement_refused"] == figures["llm_placement_failed"] == 0
    assert revised.purity >= offline.purity
    print(f"purity {offline.purity} -> {revised.purity}, placed {offline.placed} -> {revised.placed}, {figures}")
