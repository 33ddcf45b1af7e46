"""The resolution guards in the pipeline, on the real Neo4j: a judge (here an LLM over HTTP that
calls every scripted pair redundant, its offline veto off) cannot merge "Sam thanks Ana for her
support" with "Sam supports Ana" — who does what to whom differs — while a true repeat it names
is merged; the guarded answer is cached, so a rerun asks nothing and changes nothing."""

from __future__ import annotations

from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.ingest.assets import memory_items
from mem_resources.llm import OpenAIChatResource
from tests.support.pipeline import base_resources, materialize_partition, write_inbox_file
from tests.test_resolution import EVERY_PAIR, ScriptedModel, _item, _meta, _nodes

THANKS, SUPPORTS = "Sam thanks Ana for her support.", "Sam supports Ana."
ZH_THANKS, ZH_SUPPORTS = "张伟感谢李娜的支持", "张伟支持李娜"
ALLERGY, ALLERGY_AGAIN = "Rosa is allergic to cats.", "Rosa has a cat allergy."


def test_a_role_reversal_stays_apart_even_when_the_judge_says_redundant(neo4j, instance, tenant, tmp_path, model):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "2026-03-01.jsonl", [_item(THANKS), _item(ZH_THANKS), _item(ALLERGY)])
    write_inbox_file(inbox, tenant, "2026-03-02.jsonl", [_item(SUPPORTS, "2026-03-02T10:00:00Z"),
                                                         _item(ZH_SUPPORTS, "2026-03-02T10:00:00Z"),
                                                         _item(ALLERGY_AGAIN, "2026-03-02T10:00:00Z")])
    model.chat = ScriptedModel({frozenset(pair): "redundant" for pair in
                                ((THANKS, SUPPORTS), (ZH_THANKS, ZH_SUPPORTS), (ALLERGY, ALLERGY_AGAIN))})
    resources = {**base_resources(neo4j, inbox, tmp_path / "quarantine"),
                 "judge": OpenAIJudge(chat=OpenAIChatResource(base_url=model.base_url, max_retries=0),
                                      offline_veto=False)}

    def run():
        result = materialize_partition([memory_items, dedup_candidates, relation_judgments, merged_nodes,
                                        *dedup_checks], tenant, instance, resources, EVERY_PAIR)
        assert result.success and all(check.passed for check in result.get_asset_check_evaluations())
        return result

    result = run()

    judged = _meta(result, "relation_judgments")
    assert judged["pairs_guarded"] == 2 and judged["redundant"] == 1
    assert _meta(result, "merged_nodes")["merges"] == 1
    graph = _nodes(neo4j, tenant)
    for text in (THANKS, SUPPORTS, ZH_THANKS, ZH_SUPPORTS):
        assert graph[text]["status"] == "activated" and "dedup_checked_at" in graph[text], text
    assert graph[ALLERGY]["status"] == "archived"  # merged into a node with the newer text
    with neo4j.session() as session:
        reasons = [r["reason"] for r in session.run(
            "MATCH (j:DedupJudgment {user_name: $t}) WHERE j.reason CONTAINS 'roles guard' RETURN j.reason AS reason",
            t=tenant)]
    assert len(reasons) == 2 and all(r.startswith("judged redundant (scripted)") for r in reasons)

    calls = len(model.chat_calls())
    rerun = run()
    assert len(model.chat_calls()) == calls
    assert _meta(rerun, "merged_nodes")["merges"] == 0 and _nodes(neo4j, tenant) == graph


def test_the_offline_judge_no_longer_supersedes_a_cat_by_another_cat(neo4j, instance, tenant):
    """Found on the real-server test's tenant: the offline judge is sure "has a cat named Milo"
    replaces "has a cat named Luna"; the ``several`` guard keeps both, and says why."""
    from tests.test_dedup import metadata, nodes, run_dedup, write_items

    ids = write_items(neo4j, tenant, ["The user has a cat named Luna.", "The user has a cat named Milo."])
    result = run_dedup(neo4j, tenant, instance)
    judged = metadata(result, "relation_judgments")
    assert judged["pairs"] == 1 and judged["pairs_guarded"] == 1 and judged["contradictory"] == 0
    [reason] = result.output_for_node("relation_judgments")["reason"]
    assert reason.startswith("judged contradictory") and "several guard" in reason
    assert metadata(result, "merged_nodes")["supersedes"] == 0
    graph = nodes(neo4j, tenant)
    assert [graph[i]["status"] for i in ids] == ["activated", "activated"]
    rerun = run_dedup(neo4j, tenant, instance)
    assert metadata(rerun, "merged_nodes")["supersedes"] == 0 and nodes(neo4j, tenant) == graph
