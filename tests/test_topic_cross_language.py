"""A bilingual tenant on the real Neo4j: Chinese memories of themes the tenant wrote about in
English join the English topic of their theme (multilingual-e5 relates the languages), the
topic's centroid stays in the combined space, the checks hold, and a rebuild keeps it so."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from mem_assets.reorg.topic_space import language
from mem_assets.reorg.topic_vectors import COMBINED_SPACE, space_dimension
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.reorg_graph import materialization_metadata, run_reorg, write_memories

ITEMS = Path(__file__).resolve().parents[1] / "research" / "data" / "eval" / "topics.jsonl"
THEMES = ("japan_trip", "dentist", "gardening", "sleep", "guitar")
COMBINED_DIMENSION = space_dimension(COMBINED_SPACE, 0)


def _rows() -> list[dict]:
    return [row for line in ITEMS.read_text(encoding="utf-8").splitlines()
            if (row := json.loads(line))["topic"] in THEMES]


def _homes(neo4j: Neo4jResource, tenant: str) -> dict[str, dict]:
    """Per memory text: its top-level topic, that topic's language, centroid space and size."""
    with neo4j.session() as session:
        rows = session.run(
            """
            MATCH (m:MemoryItem {user_name: $tenant, status: 'activated'}) WHERE m.type <> 'topic'
            OPTIONAL MATCH (leaf:MemoryItem {status: 'activated', type: 'topic'})-[:PARENT]->(m)
            OPTIONAL MATCH (root:MemoryItem {status: 'activated', type: 'topic'})-[:PARENT]->(leaf)
            WITH m, leaf, coalesce(root, leaf) AS top
            RETURN m.memory AS text, top.id AS root, top.reorg_language AS language,
                   leaf.reorg_centroid_space AS space, size(leaf.reorg_centroid) AS dimension
            """, tenant=tenant).data()
    return {row["text"]: row for row in rows}


def _majority(homes: dict[str, dict], theme_of: dict[str, str]) -> dict[str, str]:
    counts: dict[str, Counter] = {}
    for text, home in homes.items():
        if home["root"]:
            counts.setdefault(home["root"], Counter())[theme_of[text]] += 1
    return {root: c.most_common(1)[0][0] for root, c in counts.items()}


def _check_chinese_in_english_topics(neo4j: Neo4jResource, tenant: str, chinese: list[str],
                                     theme_of: dict[str, str]) -> None:
    homes = _homes(neo4j, tenant)
    theme_of_root = _majority(homes, theme_of)
    abroad = [text for text in chinese if homes[text]["language"] == "en"]
    assert len(abroad) >= 9, f"only {len(abroad)} of {len(chinese)} Chinese memories joined an English topic"
    assert all(theme_of_root[homes[text]["root"]] == theme_of[text] for text in abroad), \
        "a Chinese memory joined an English topic of another theme"
    assert all(homes[text]["space"] == COMBINED_SPACE and homes[text]["dimension"] == COMBINED_DIMENSION
               for text in abroad), "a mixed topic keeps its centroid in the combined space"


def test_a_chinese_memory_joins_the_english_topic_of_its_theme(neo4j, tenant, instance):
    rows = _rows()
    english = [r["text"] for r in rows if r["batch"] == 1 and language(r["text"]) == "en"]
    chinese = [r["text"] for r in rows if language(r["text"]) == "zh"]
    theme_of = {r["text"]: r["topic"] for r in rows}
    write_memories(neo4j, tenant, english)
    first = run_reorg(neo4j, tenant, instance)
    assert first.success
    english_roots = {h["root"] for h in _homes(neo4j, tenant).values() if h["root"]}
    assert len(english_roots) == len(THEMES)

    write_memories(neo4j, tenant, chinese)
    second = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}})
    assert second.success
    assert materialization_metadata(second, "memory_clusters")["kept_vectors_made"] <= len(chinese), \
        "only new memories are embedded with e5"
    assert all(check.passed for check in second.get_asset_check_evaluations())
    _check_chinese_in_english_topics(neo4j, tenant, chinese, theme_of)
    homes = _homes(neo4j, tenant)
    assert {h["root"] for text, h in homes.items() if text in chinese and h["language"] == "en"} <= english_roots, \
        "they join the existing topics of their theme, not new ones"

    with neo4j.session() as session:
        without = session.run("MATCH (m:MemoryItem {user_name: $tenant}) WHERE coalesce(m.type, '') <> 'topic' "
                              "AND m.reorg_vector IS NULL RETURN count(m) AS n", tenant=tenant).single()["n"]
    rebuild = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"rebuild": True}}}})
    assert rebuild.success
    assert materialization_metadata(rebuild, "memory_clusters")["kept_vectors_made"] <= without, \
        "a rebuild embeds no memory that has its kept vector (the cascade may embed some that have none)"
    assert all(check.passed for check in rebuild.get_asset_check_evaluations())
    _check_chinese_in_english_topics(neo4j, tenant, chinese, theme_of)
