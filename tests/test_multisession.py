"""The bundled multi-session sample (tests/data/multisession: two tenants, one inbox file per
session) through the whole tend_memory pipeline in Dagster on the real Neo4j, with the offline
defaults (WordLlama embedder, learned judge): every merge and supersede it makes is one the
labels call right, and a rerun changes nothing and asks the judge nothing."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from mem_assets.definitions import tenant_pipeline
from mem_assets.ingest.inbox import InboxResource
from mem_assets.resources import build_resources
from mem_resources.memory_model import normalize_text
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import Settings
from tests.support.pipeline import materialize_partition
from tests.test_end_to_end import _fingerprint

SAMPLE = Path(__file__).resolve().parent / "data" / "multisession"


def _labels() -> dict[str, dict[frozenset[str], tuple[str, str, str]]]:
    """Per sample tenant: {a, b} -> (label, a, b); b is the newer memory."""
    labels: dict[str, dict[frozenset[str], tuple[str, str, str]]] = defaultdict(dict)
    for line in (SAMPLE / "labels.jsonl").read_text("utf-8").splitlines():
        row = json.loads(line)
        labels[row["tenant"]][frozenset((row["a"], row["b"]))] = (row["label"], row["a"], row["b"])
    return labels


def _redundant_connected(texts: set[str], labels: dict[frozenset[str], tuple[str, str, str]]) -> bool:
    """Whether labeled-redundant pairs (or identical texts) join all of ``texts`` into one group."""
    texts = {normalize_text(t) for t in texts}
    reached, frontier = set(), [next(iter(texts))]
    while frontier:
        text = frontier.pop()
        if text in reached:
            continue
        reached.add(text)
        frontier += [other for other in texts if other not in reached and labels.get(
            frozenset((text, other)), ("independent",))[0] == "redundant"]
    return reached == texts


def _contradiction_path(older: str, newer: str, labels: dict[frozenset[str], tuple[str, str, str]]) -> bool:
    """Whether labeled contradictions lead from ``older`` to ``newer``, each step to a newer
    memory (a chain A < B < C resolves to C)."""
    steps = defaultdict(set)
    for label, a, b in labels.values():
        if label == "contradictory":
            steps[a].add(b)
    reached, frontier = set(), [older]
    while frontier:
        text = frontier.pop()
        for following in steps[text] - reached:
            reached.add(following)
            frontier.append(following)
    return newer in reached


def _resolutions(neo4j: Neo4jResource, tenant: str) -> tuple[list[set[str]], list[tuple[str, str]]]:
    """Merges as the original texts each merged node stands for, and supersedes as (older text,
    newer text) — a merged node counting as the texts of its sources."""
    with neo4j.session() as session:
        merged_to = session.run(
            "MATCH (s:MemoryItem {user_name: $t})-[:MERGED_TO]->(m) RETURN s.id AS s, s.memory AS text, "
            "m.id AS m", t=tenant).data()
        superseded = session.run(
            "MATCH (o:MemoryItem {user_name: $t})-[:SUPERSEDED_BY]->(n) RETURN o.id AS o, o.memory AS old, "
            "n.id AS n, n.memory AS new", t=tenant).data()
    sources = defaultdict(set)
    for row in merged_to:
        sources[row["m"]].add(row["s"])
    texts = {row["s"]: row["text"] for row in merged_to}

    def originals(node: str, text: str) -> set[str]:
        if node not in sources:
            return {text}
        return set().union(*(originals(s, texts[s]) for s in sources[node]))

    merges = [originals(m, "") for m in sources]
    supersedes = [(old, new) for row in superseded
                  for old in originals(row["o"], row["old"]) for new in originals(row["n"], row["new"])]
    return merges, supersedes


#: The wrong resolutions the fast model (judge-v2) makes here: "allergic to cats" (merged with
#: "has a cat allergy") contradicted by "does not currently have any pets" (a negation in the
#: same domain). judge-v3 made the same two; judge-v6 and the default judge-v7 make none, and
#: any other model (another fingerprint) must make none.
_CAT_ALLERGY_SUPERSEDED = {
    ("rosa", "supersede", "Rosa is allergic to cats.", "Rosa does not currently have any pets."),
    ("rosa", "supersede", "Rosa has a cat allergy.", "Rosa does not currently have any pets."),
}
KNOWN_WRONG = {"offline-model:judge-v2:aaad9bac595af6a6": _CAT_ALLERGY_SUPERSEDED}


@pytest.fixture(scope="module")
def tended(neo4j: Neo4jResource) -> Iterator[dict[str, Any]]:
    """Both sample tenants through tend_memory twice, with the offline defaults."""
    run = uuid.uuid4().hex[:8]
    settings = Settings(automation="off")
    assert (settings.embedder, settings.llm) == ("offline", "offline")
    with tempfile.TemporaryDirectory() as folder, dg.instance_for_test() as instance:
        inbox = Path(folder) / "inbox"
        names = {sample: f"ms_{run}_{sample}" for sample in ("rosa", "wei")}
        for sample, name in names.items():
            shutil.copytree(SAMPLE / "inbox" / sample, inbox / name)
        resources = {**build_resources(settings), "neo4j": neo4j,
                     "inbox": InboxResource(root=str(inbox), quarantine_dir=str(Path(folder) / "q"))}
        outcome: dict[str, Any] = {"names": names, "judge": resources["judge"].fingerprint}
        for sample, name in names.items():
            first = materialize_partition(tenant_pipeline, name, instance, resources)
            before = _fingerprint(neo4j, name)
            rerun = materialize_partition(tenant_pipeline, name, instance, resources)
            outcome[sample] = {"first": first, "rerun": rerun, "before": before,
                               "after": _fingerprint(neo4j, name),
                               "resolutions": _resolutions(neo4j, name)}
        yield outcome


def _metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_a_rerun_of_the_sample_changes_nothing_and_asks_the_judge_nothing(tended):
    for sample in ("rosa", "wei"):
        runs = tended[sample]
        assert runs["first"].success and runs["rerun"].success
        assert _metadata(runs["first"], "relation_judgments")["judge_calls"] > 0
        assert runs["after"] == runs["before"]
        assert _metadata(runs["rerun"], "relation_judgments")["judge_calls"] == 0
        assert _metadata(runs["rerun"], "merged_nodes")["merges"] == 0


def test_every_resolution_on_the_multisession_sample_is_one_the_labels_call_right(tended):
    labels = _labels()
    made, wrong = 0, set()
    for sample in ("rosa", "wei"):
        merges, supersedes = tended[sample]["resolutions"]
        made += len(merges) + len(supersedes)
        wrong |= {(sample, "merge", *sorted(group)) for group in merges
                  if not _redundant_connected(group, labels[sample])}
        wrong |= {(sample, "supersede", old, new) for old, new in supersedes
                  if not _contradiction_path(old, new, labels[sample])}
    assert made >= 1, "the sample has clear duplicates and contradictions; the pipeline resolved none"
    if tended["judge"] in KNOWN_WRONG:
        assert wrong == KNOWN_WRONG[tended["judge"]]
        pytest.xfail(f"{tended['judge']} makes {len(wrong)} known wrong supersedes here (issue 10 is open)")
    assert wrong == set()
