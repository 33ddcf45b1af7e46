"""`memtend eval-topics` plans each tenant on its own, as production does: two users with the very
same memories get a topic each, never a shared one, and their alike topics are not near-duplicates
of each other (the asset check looks within one tenant). The command line takes thresholds per
topic space as the MEMTEND_TOPIC_THRESHOLDS file does. No Neo4j."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mem_assets.cli import app
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics
from mem_assets.reorg.placement import PlacementParams
from mem_resources.embedder import WordLlamaEmbedder

THEMES = {
    "dog": ["The user walks their beagle Biscuit every morning before work.",
            "Biscuit the beagle chewed through the user's new running shoes.",
            "The user booked Biscuit a vet appointment for his vaccinations.",
            "The user is training their dog Biscuit to stay off the couch.",
            "Biscuit loves chasing squirrels at the dog park on weekends."],
    "baking": ["The user baked a sourdough loaf with a new starter this weekend.",
               "The user is perfecting a recipe for lemon drizzle cake.",
               "The user bought a stand mixer to bake bread more often.",
               "The user's chocolate chip cookies came out too flat again.",
               "The user wants to learn to bake croissants from scratch."],
}


def items(tenants: tuple[str, str]) -> list[EvalItem]:
    """The same ten memories for two users; labels are per user (as topics are)."""
    return [EvalItem(text=text, topic=f"{user}: {theme}", batch=1 if k < 3 else 2, tenant=tenant)
            for user, tenant in zip(("ann", "bob"), tenants, strict=True)
            for theme, texts in THEMES.items()
            for k, text in enumerate(texts)]


#: In WordLlama space (no e5, no combined language), low enough that a user's ten memories make topics at all.
PARAMS = PlacementParams(group_similarity=0.05, place_similarity=0.10, min_cluster_size=2)


@pytest.fixture(scope="module")
def embedder():
    return WordLlamaEmbedder()


def test_two_tenants_never_share_a_topic(embedder):
    report = evaluate_topics(items(("ann", "bob")), embedder, PARAMS, e5_languages=(), combined_languages=())
    assert report.tenants == 2
    assert report.placed > 0.5
    assert report.purity == 1.0
    assert report.near_duplicate_pairs == 0


def test_without_tenants_the_same_memories_would_share_topics(embedder):
    """The control: one tenant holding both users' memories mixes them, so the test above can fail."""
    report = evaluate_topics(items(("one", "one")), embedder, PARAMS, e5_languages=(), combined_languages=())
    assert report.tenants == 1
    assert report.placed > 0.5
    assert report.purity <= 0.5


@pytest.fixture
def items_file(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(item.model_dump_json() + "\n" for item in items(("ann", "bob"))), encoding="utf-8")
    return path


def _eval_cli(path, *options: str):
    return CliRunner().invoke(app, ["eval-topics", str(path), "--embedder", "wordllama",
                                    "--e5-languages", "none", "--combined-languages", "none", *options])


def test_cli_scores_per_tenant_with_the_given_thresholds(items_file):
    """`--placement` takes thresholds per topic space (the MEMTEND_TOPIC_THRESHOLDS file's shape):
    the figures are those of that setting."""
    config = {"embedder": {"group_similarity": PARAMS.group_similarity, "place_similarity": PARAMS.place_similarity,
                           "min_cluster_size": PARAMS.min_cluster_size}}
    result = _eval_cli(items_file, "--placement", json.dumps(config))
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["tenants"] == 2
    assert report["purity"] == 1.0
    assert report["placed"] > 0.5
    assert json.loads(_eval_cli(items_file).output)["placed"] < report["placed"]


def test_cli_refuses_a_misspelt_threshold(items_file):
    """A typo must not silently score the shipped defaults."""
    result = _eval_cli(items_file, "--placement", '{"embedder": {"place_similarty": 0.2}}')
    assert result.exit_code == 2
    assert "place_similarty" in result.output
