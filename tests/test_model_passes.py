"""Each step reports the model passes it paid for, on the real Neo4j: ``relation_judgments`` its
e5, bge, cross-encoder and judge-tree passes, ``reorg_candidates`` its kept topic vectors, counted
where the models run; a rerun with nothing new runs no model."""

from __future__ import annotations

from mem_resources.model_passes import from_metadata
from tests.support.reorg_graph import materialization_metadata, run_reorg, write_memories
from tests.test_dedup import metadata, run_dedup, write_items

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
    assert set(passes) & {"e5 query", "topic-encoder-zh-v1"} == set(), "one language: its own encoder only"
    assert passes["topic-encoder-v1"].items == len(texts)

    again = run_reorg(neo4j, tenant, instance)
    assert from_metadata(materialization_metadata(again, "memory_clusters")) == {}
