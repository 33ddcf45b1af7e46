"""Schema documents: folding Cypher rows, and classifying differences as seed 002 does."""

from __future__ import annotations

from mem_assets.context_graph.schema_export import (
    REFERENCE_PATH,
    Severity,
    as_reference,
    breaking,
    build_document,
    diff,
    load_document,
    render_diff_markdown,
    render_markdown,
)

MEM, CHAR, CONV = ["Node", "MemoryItem"], ["Character"], ["Conversation"]


def _doc(groups=(), props=(), rels=()):
    return build_document("t", [dict(zip(("labels", "prefix", "id_format", "count"), g)) for g in groups],
                          [dict(zip(("labels", "prefix", "key", "count"), p)) for p in props],
                          [dict(zip(("type", "source_labels", "source_prefix", "target_labels",
                                     "target_prefix", "count", "cross_tenant"), r)) for r in rels])


def _base(conv_format="<date>", owns=(CHAR, "char:", MEM, "mem:"), char_prefix="char:", extra_groups=(),
          extra_props=(), cross=0):
    return _doc(
        groups=[(MEM, "mem:", "<md5>", 4), (CHAR, char_prefix, "<x>", 2), (CONV, "conv:", conv_format, 1),
                *extra_groups],
        props=[(MEM, "mem:", "id", 4), (MEM, "mem:", "data", 4), (CHAR, char_prefix, "id", 2),
               (CHAR, char_prefix, "character_id", 2), (CONV, "conv:", "id", 1), *extra_props],
        rels=[("OWNS_MEMORY", *owns, 4, cross), ("FROM_CONV", MEM, "mem:", CONV, "conv:", 4, 0)],
    )


def test_rows_fold_into_types_whatever_the_label_order():
    doc = _doc(groups=[(["Node", "MemoryItem"], "mem:", "<md5>", 3), (["MemoryItem", "Node"], "mem:", "<md5>", 2)])
    [node] = doc.node_types
    assert (node.type, node.count, node.labels, node.id_formats) == ("MemoryItem", 5, {":MemoryItem:Node": 5},
                                                                     {"mem:<md5>": 5})


def test_identical_documents_have_no_differences():
    assert diff(_base(), _base()) == []


def test_seed_002_expected_differences():
    reference = _base(conv_format="ch<n>")
    candidate = _base(conv_format="<date>", extra_props=[(MEM, "mem:", "point_id", 1)])
    candidate.node_type("MemoryItem").count = 7
    found = diff(reference, candidate)
    assert breaking(found) == []
    kinds = {(d.kind, d.subject) for d in found}
    assert {("id format", "Conversation"), ("properties", "MemoryItem"), ("count", "MemoryItem")} <= kinds


def test_memory_item_properties_may_be_fewer():
    reference = _base(extra_props=[(MEM, "mem:", "point_id", 4)])
    assert breaking(diff(reference, _base())) == []


def test_reversed_relationship_is_breaking():
    found = breaking(diff(_base(), _base(owns=(MEM, "mem:", CHAR, "char:"))))
    assert [(d.kind, d.subject) for d in found] == [("direction", "OWNS_MEMORY (MemoryItem → Character)")]


def test_wrong_prefix_is_a_new_node_type():
    candidate = _base(extra_groups=[(CHAR, "character:", "<x>", 1)])
    [difference] = breaking(diff(_base(), candidate))
    assert difference.kind == "node type" and difference.subject == "character:"


def test_other_id_format_outside_conversations_is_breaking():
    reference = _doc(groups=[(["Domain"], "dom:", "<x>:<x>:<x>", 1)])
    candidate = _doc(groups=[(["Domain"], "dom:", "<x>:<x>", 1)])
    [difference] = breaking(diff(reference, candidate))
    assert difference.kind == "id format"


def test_other_labels_unknown_relationships_and_cross_tenant_edges_are_breaking():
    person = ["Character", "Person"]
    candidate = _base(cross=2, extra_groups=[(person, "char:", "<x>", 1)],
                      extra_props=[(person, "char:", "id", 1), (person, "char:", "character_id", 1)])
    candidate.relationship_types[0].type = "KNOWS"
    kinds = {d.kind for d in breaking(diff(_base(), candidate))}
    assert kinds == {"labels", "relationship type", "tenant isolation"}


def test_required_properties_must_not_go_missing_others_may():
    reference = _base(extra_props=[(CHAR, "char:", "nickname", 2)])
    reference.node_type("Character").required = ["id", "character_id"]
    candidate = _doc(groups=[(CHAR, "char:", "<x>", 2)], props=[(CHAR, "char:", "id", 2)])
    found = [d for d in diff(reference, candidate) if d.kind == "properties"]
    assert [(d.severity, d.detail) for d in found] == [
        (Severity.BREAKING, "required, missing on some nodes: character_id"),
        (Severity.EXPECTED, "fewer: nickname"),
    ]


def test_reference_requires_seed_002_identifying_properties():
    reference = as_reference(_base())
    assert reference.node_type("Character").required == ["id", "user_name", "character_id", "name", "display"]
    assert reference.node_type("MemoryItem").required == ["id", "user_name"]


def test_types_the_candidate_lacks_are_expected():
    candidate = _doc(groups=[(MEM, "mem:", "<md5>", 1)], props=[(MEM, "mem:", "id", 1)])
    found = diff(_base(), candidate)
    assert found and breaking(found) == []


def test_shipped_reference_knows_seed_002_and_memtend_relationships():
    reference = load_document(REFERENCE_PATH)
    edges = {(r.type, r.source, r.target) for r in reference.relationship_types}
    assert {("OWNS_MEMORY", "Character", "MemoryItem"), ("ACTOR", "Agent", "Character"),
            ("EVIDENCED_BY", "Claim", "MemoryItem"), ("ABOUT", "Claim", "Topic"),
            ("MERGED_TO", "MemoryItem", "MemoryItem")} <= edges
    assert len({r.type for r in reference.relationship_types} - {"MERGED_TO", "SUPERSEDED_BY", "PARENT"}) == 12
    assert {n.type for n in reference.node_types} >= {
        "MemoryItem", "Character", "Conversation", "Scene", "User", "Agent", "Claim", "Domain", "Predicate", "Topic"}
    merged = _base(extra_groups=[])
    merged.relationship_types.append(as_reference(merged).relationship_types[0].model_copy(
        update={"type": "MERGED_TO", "source": "MemoryItem", "target": "MemoryItem", "count": 3}))
    edge_kinds = {"relationship type", "endpoints", "direction"}
    assert not [d for d in breaking(diff(as_reference(_base()), merged)) if d.kind in edge_kinds]
    assert {n.type for n in reference.node_types} >= {"IngestedFile", "DedupJudgment"}


def test_markdown_renders_every_type_and_the_verdict():
    text = render_markdown(_base())
    assert "| OWNS_MEMORY | Character | → | MemoryItem | 4 |" in text
    assert "`conv:<date>`" in text
    report = render_diff_markdown(diff(_base(), _base(owns=(MEM, "mem:", CHAR, "char:"))), "ref", "live")
    assert "**1 breaking, 1 expected.**" in report and "| breaking | direction |" in report
    assert Severity.BREAKING.value in report
