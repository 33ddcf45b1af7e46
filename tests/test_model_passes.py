"""Each step reports the model passes it paid for, on the real Neo4j: ``relation_judgments`` its
e5, bge, cross-encoder and judge-tree passes, ``memory_clusters`` its kept topic vectors, counted
where the models run; a rerun with nothing new runs no model. A memory's e5 vector is made once
between dedup and placement: whichever stage meets it first makes it, the other reads it back."""

from __future__ import annotations

import numpy as np

from mem_resources.embedder import E5_PASSAGE_SPACE, stored_vector_key
from mem_resources.model_passes import from_metadata
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.reorg_graph import materialization_metadata, run_reorg, write_memories
from tests.test_dedup import metadata, run_dedup, write_items

#: Plan a small tenant's memories in this run (not held for a batch of ``min_group_size``).
NOW = {"ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}}
# Texts no other test uses: the cross-encoder keeps each pair it ran for the life of the process.
TEXTS = ["The user keeps a sourdough starter named Clint in the fridge.",
         "The user keeps a sourdough starter called Clint in the refrigerator."]


def test_relation_judgments_reports_the_model_passes_of_its_step(neo4j, instance, tenant):
    write_items(neo4j, tenant, TEXTS)
    first = run_dedup(neo4j, tenant, instance)
    judged = metadata(first, "relation_judgments")
    passes = from_metadata(judged)
    assert judged["pairs"] == 1 and judged["pairs_gated"] == 0
    assert passes["e5 passage"].items == judged["text_vectors_made"] == 2
    assert sum(c.items for m, c in passes.items() if m.endswith("cross-encoder")) == judged["cross_encoder_pair_orders"]
    assert any(m.endswith("token states") for m in passes), "bge token states of the pair's texts"
    assert any(m.endswith("trees") and c.items >= 2 for m, c in passes.items()), "both orders of the pair"
    assert all(c.seconds > 0 for c in passes.values())

    again = metadata(run_dedup(neo4j, tenant, instance), "relation_judgments")
    assert from_metadata(again) == {}, "nothing new: no model runs"


def test_memory_clusters_reports_the_kept_vectors_it_made(neo4j, instance, tenant):
    texts = [f"Practised the {chord} chord on the guitar for {minutes} minutes today."
             for chord in ("G", "C", "D", "E minor", "A minor") for minutes in (10, 20, 30, 40, 50)]
    write_memories(neo4j, tenant, texts)
    first = run_reorg(neo4j, tenant, instance)
    made = materialization_metadata(first, "memory_clusters")
    passes = from_metadata(made)
    assert made["kept_vectors_made"] == len(texts)
    assert passes["e5 passage"].items == len(texts) and "e5 query" not in passes
    assert all(c.items == len(texts) for m, c in passes.items() if m.startswith("topic-encoder"))

    again = run_reorg(neo4j, tenant, instance)
    assert from_metadata(materialization_metadata(again, "memory_clusters")) == {}


def _e5_vectors(neo4j: Neo4jResource, tenant: str) -> dict[str, tuple[bytes | None, list[float] | None]]:
    """Each live memory's judge vector (made from its text) and kept topic vector, by text."""
    with neo4j.session() as session:
        rows = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE coalesce(m.type, '') <> 'topic' "
            "AND m.status = 'activated' RETURN m.memory AS memory, m.judge_vector AS judge, "
            "m.judge_vector_key AS key, m.reorg_vector AS kept", tenant=tenant).data()
    return {row["memory"]: (row["judge"] if row["key"] == stored_vector_key(E5_PASSAGE_SPACE, row["memory"])
                            else None, row["kept"]) for row in rows}


def test_a_memory_runs_e5_once_between_dedup_and_placement(neo4j, instance, tenant):
    pair = ["The user's cat Miso only eats salmon-flavoured kibble from the blue bag.",
            "The user's cat Miso eats nothing but the salmon kibble in the blue bag."]
    others = ["Booked the dentist for a cleaning on the second Tuesday of March.",
              "The quarterly tax estimate is due before the fifteenth.",
              "Grandma's recipe for pickled plums needs three weeks in the cellar.",
              "The left rear tyre of the hatchback keeps losing pressure.",
              "Signed up for an evening pottery class at the community centre.",
              "The router in the study reboots itself every night around two."]
    write_items(neo4j, tenant, pair + others)
    dedup = metadata(run_dedup(neo4j, tenant, instance), "relation_judgments")
    judged = {text for text, (judge, _) in _e5_vectors(neo4j, tenant).items() if judge is not None}
    assert judged and from_metadata(dedup)["e5 passage"].items == dedup["text_vectors_made"]

    placed = materialization_metadata(run_reorg(neo4j, tenant, instance, run_config=NOW), "memory_clusters")
    passes = from_metadata(placed)
    assert "e5 query" not in passes, "placement runs no second e5 pass of its own"
    assert placed["kept_e5_from_judge"] == len(judged), "the judge's vectors are read back, not made again"
    assert passes["e5 passage"].items == placed["kept_vectors_made"] - len(judged) > 0
    kept = _e5_vectors(neo4j, tenant)
    assert all(judge is not None and np.allclose(np.frombuffer(judge, dtype="<f4"), vector[:384], atol=1e-6)
               for judge, vector in kept.values()), "one e5 vector per memory, the same for both stages"

    # A later night: a repeat of a memory only placement had embedded; dedup reads its vector back.
    repeat = "The left rear tyre of the hatchback keeps going flat."
    write_items(neo4j, tenant, [repeat], start_minutes=60)
    again = metadata(run_dedup(neo4j, tenant, instance), "relation_judgments")
    assert again["pairs"] >= 1 and again["text_vectors_reused"] >= 1, "old texts' vectors read back"
    assert again["text_vectors_made"] == 1, "e5 ran for the new text only"
    assert from_metadata(again)["e5 passage"].items == 1
    placed_again = materialization_metadata(run_reorg(neo4j, tenant, instance, run_config=NOW), "memory_clusters")
    assert "e5 passage" not in from_metadata(placed_again), "every live memory already had its e5 vector"
