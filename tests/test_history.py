"""`memtend history` on the real Neo4j, after a dedup run that merged one pair and superseded
another, an undo of the merge and a review answered: `memtend history MEMORY_ID` and `memtend
history --tenant T --search TEXT` print each version, the merge, the supersede, the undo and the
review, each dated and with the run it belongs to. The judge is an LLM over HTTP whose answers
the test scripts (tests/test_resolution.py's ``ScriptedModel``)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from mem_assets.cli import app
from mem_assets.dedup import queries
from mem_assets.dedup.review_queue import answer
from mem_assets.dedup.undo import undo
from tests.support.pipeline import write_inbox_file
from tests.test_resolution import _contradicts, _item
from tests.test_undo_review import CATS, CATS_AGAIN, NEW, OLD, RELATIONS, TWINS_A, TWINS_B, _dedup, _seed

#: An event line: two spaces, its ISO date, two spaces, what happened.
EVENT = re.compile(r"^  (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^ ]*)  (.+)$")


def _ids(neo4j, tenant) -> dict[str, str]:
    """Long-term text -> id of its (first-ingested) node."""
    with neo4j.session() as session:
        return dict(session.run("MATCH (n:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'}) "
                                "WHERE n.update_type IS NULL RETURN n.memory, n.id", t=tenant).values())


def _history(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["history", *args])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def _events(lines: list[str]) -> list[tuple[str, str]]:
    return [m.groups() for line in lines if (m := EVENT.match(line))]


def test_history_names_versions_merge_supersede_undo_and_review_with_runs_and_dates(
        neo4j, neo4j_uri, instance, tenant, tmp_path, model, monkeypatch):
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    write_inbox_file(tmp_path / "inbox", tenant, "2026-03-01-kids.jsonl", [_item(TWINS_A), _item(TWINS_B)])
    inbox = _seed(neo4j, tenant, instance, model, tmp_path)
    run = _dedup(neo4j, tenant, instance, model, inbox, {**RELATIONS, **_contradicts(TWINS_A, TWINS_B)}).run_id
    ids = _ids(neo4j, tenant)
    with neo4j.session() as session:
        records = {r["kind"]: r for r in session.execute_read(queries.resolutions_of_run, tenant, run)}
        [queued] = session.execute_read(queries.reviews, tenant, "pending")
    merge, supersede = records["merge"], records["supersede"]
    undo(neo4j, tenant, resolution_id=merge["id"])
    answer(neo4j, tenant, queued["id"], accept=False)

    # the superseded memory and its survivor: the supersede, the survivor's versions
    newer = _history(ids[NEW])
    assert newer[0].startswith(f"{ids[NEW]} [activated] version ") and newer[0].endswith(NEW)
    events = _events(newer)
    assert any(text.startswith(f"supersede (result) {supersede['id']} in run {run}: {OLD} -> {NEW}")
               for _, text in events), newer
    assert any(text.startswith("version ") and f"was {ids[OLD]}" in text and OLD in text for _, text in events), newer
    older = _history(ids[OLD], "--tenant", tenant)
    assert any(text.startswith(f"supersede (source) {supersede['id']} in run {run}") for _, text in _events(older))
    assert older[-1].startswith("archived ") and older[-1].endswith(f"-> ['{ids[NEW]}']")

    # a merged memory: the merge, then its undo, each dated, the undo after the merge
    cats = _events(_history(ids[CATS]))
    [(merged_at, _)] = [(at, text) for at, text in cats
                        if text.startswith(f"merge (source) {merge['id']} in run {run}: ")]
    [(undone_at, undone)] = [(at, text) for at, text in cats if text.startswith(f"undone {merge['id']}")]
    assert undone.endswith(f"of run {run}") and "(undo:" in undone and undone_at >= merged_at
    assert f"{CATS} | {CATS_AGAIN}" in next(text for _, text in cats if text.startswith("merge")) or \
        f"{CATS_AGAIN} | {CATS}" in next(text for _, text in cats if text.startswith("merge"))

    # the reviewed pair, found by text: queued by the run, then answered
    found = _history("--tenant", tenant, "--search", "two children")
    blocks = {block.split(" ")[0]: block.splitlines() for block in "\n".join(found).split("\n\n")}
    assert found[-1] == "2 memories match"  # the long-term memory and its working twin
    kids = _events(blocks[ids[TWINS_A]])
    [(queued_at, _)] = [(at, text) for at, text in kids
                        if text.startswith(f"queued for review {queued['id']} in run {run}: ")]
    [(answered_at, answered)] = [(at, text) for at, text in kids if text.startswith(f"reviewed {queued['id']}: ")]
    assert answered.endswith(f"queued in run {run}") and "independent" in answered and answered_at >= queued_at
    assert all(EVENT.match(line) for line in blocks[ids[TWINS_A]][1:])  # every event dated

    rosa = _history("--tenant", tenant, "--search", "rosa lives")
    assert {ids[OLD], ids[NEW]} <= {line.split(" ")[0] for line in rosa if " [" in line and not line.startswith(" ")}
