"""A memory's history lists its events in time order, whatever precision each date was written
with (Neo4j writes 3 to 9 digits of a second, Python 6, an ingested date none)."""

from mem_assets.dedup.history import history_lines


def test_events_sort_by_time_not_by_how_the_date_was_written():
    found = {
        "id": "mem:1", "memory": "Rosa lives in Porto.", "status": "activated", "version": 2,
        "created_at": "2026-03-02T10:00:00Z", "updated_at": "2026-03-02T10:00:00Z",
        "archived_reason": None, "archived_at": None, "evolve_to": None,
        "history": '[{"created_at": "2026-03-01T10:00:00", "version": 1, "update_type": "conflict", '
                   '"archived_memory_id": "mem:0", "memory": "Rosa lives in Lisbon."}]',
        "resolutions": [{"id": "resolution:a", "kind": "supersede", "result": "mem:1", "run_id": "r1",
                         "applied_at": "2026-12-04T23:34:26.555Z", "created_at": None,
                         "source_texts": ["Rosa lives in Lisbon."], "text": "Rosa lives in Porto.",
                         "reason": "newer", "undone_at": "2026-12-04T23:34:26.555123456Z", "undone_by": "undo:1"}],
        "reviews": [{"id": "review:k", "status": "answered", "created_at": "2026-12-04T23:34:26.5551Z",
                     "run_id": "r1", "first_text": "a", "second_text": "b", "reason": "unsure",
                     "answered_at": "2026-12-04T23:34:27Z", "label": "independent", "note": "rejected",
                     "resolution_id": None}],
    }
    lines = history_lines(found)
    order = [line.split("  ")[2].split(" ")[0] for line in lines[1:]]
    assert order == ["version", "supersede", "queued", "undone", "reviewed"], lines
    assert lines[-1].endswith("queued in run r1")
