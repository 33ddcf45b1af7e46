"""Topic quality without Neo4j: a labeled JSONL through embedder, placement and clustering.

Items ``{"text", "topic", "batch", "tenant"}`` arrive batch by batch, as they would over
reorganization cycles: each batch (plus what earlier cycles left unplaced) is offered to the topics
built so far (``placement.plan_cycle``). As in production, each tenant is planned on its own: its
memories only ever meet its own topics (and its own topic-space mean). The report compares the
final forests of all tenants together with the labels:

- ``purity`` / ``ari`` / ``nmi``: placed memories by their level-1 topic against the labels
  (scikit-learn); ``root_purity`` the same by top-level topic.
- ``placed``: share of all memories under a topic at the end.
- ``topics`` / ``sub_topics``: top-level topics and level-1 topics.
- ``near_duplicate_pairs``: top-level topics of one tenant and language whose centroids (topic
  space) are at least ``merge_similarity`` alike — what the asset check flags.
- ``split_themes`` / ``roots_per_theme``: fragmentation, which leaf purity rewards. A theme is a
  label within one tenant and language; ``split_themes`` counts themes that are the majority label of two or
  more of their tenant's top-level topics (told twice), ``roots_per_theme`` is the mean number of
  top-level topics a theme's placed memories lie under (1.0 = every theme in one tree).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from mem_assets.reorg.cascade import Anchors, CascadeParams, impute, route
from mem_assets.reorg.clustering import purity
from mem_assets.reorg.llm_placement import PlacementAdvisor, TopicOption
from mem_assets.reorg.offline_summaries import PhraseIndex, phrase_summary, typical_first
from mem_assets.reorg.placement import (
    CrossParams,
    LanguagePool,
    PlacementParams,
    Topic,
    near_duplicate_roots,
    plan_languages,
)
from mem_assets.reorg.placement_thresholds import CASCADE_PARAMS, COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_space import languages
from mem_assets.reorg.topic_vectors import (
    DEFAULT_COMBINED_LANGUAGES,
    DEFAULT_E5_LANGUAGES,
    E5_SPACE,
    MAIN_SPACE,
    NEEDS_E5,
    in_spaces,
    is_encoder_space,
    kept_embed,
    space_of,
    to_shared,
)
from mem_resources.embedder import EmbedderResource


class EvalItem(BaseModel):
    text: str = Field(min_length=1)
    topic: str = Field(min_length=1)
    batch: int = 1
    tenant: str = "default"


class BatchFigures(BaseModel):
    batch: int
    memories: int
    placed: float
    topics: int
    created: int
    grown: int
    refreshed: int


class NearDuplicate(BaseModel):
    first: str
    second: str
    similarity: float


class LanguageFigures(BaseModel):
    memories: int
    placed: float
    purity: float


class TopicReport(BaseModel):
    memories: int
    labels: int
    tenants: int
    batches: int
    placed: float
    purity: float
    ari: float
    nmi: float
    root_purity: float
    topics: int
    sub_topics: int
    near_duplicate_pairs: int
    near_duplicates: list[NearDuplicate]
    split_themes: int
    roots_per_theme: float
    set_aside_reasons: dict[str, int]
    by_language: dict[str, LanguageFigures]
    per_batch: list[BatchFigures]
    #: Memories per cascade stage (``cheap``: placed by the embedder's space, no model pass;
    #: ``paid``: given their kept vector) and placements the paid vector changed from the cheap
    #: space's nearest topic (``cascade``).
    stages: dict[str, int] = Field(default_factory=dict)


def read_items(path: Path) -> list[EvalItem]:
    with path.open(encoding="utf-8") as handle:
        return [EvalItem.model_validate_json(line) for line in handle if line.strip()]


def holdout_split(items: Sequence[EvalItem]) -> tuple[list[EvalItem], list[EvalItem]]:
    """Thresholds are tuned on every other label (sorted by name) and reported on the rest too."""
    labels = sorted({item.topic for item in items})
    tune = set(labels[0::2])
    return ([item for item in items if item.topic in tune],
            [item for item in items if item.topic not in tune])


def near_duplicates(topics: dict[str, Topic], params_of: Callable[[str], PlacementParams]) -> list[NearDuplicate]:
    """Per language (each in its own space, with its own merge threshold), within one tenant's forest."""
    pairs = []
    for lang in sorted({t.language for t in topics.values()}):
        roots = sorted((t for t in topics.values() if t.parent is None and t.language == lang), key=lambda t: t.id)
        pairs.extend(near_duplicate_roots(roots, params_of(lang).merge_similarity))
    return [NearDuplicate(first=a.id, second=b.id, similarity=round(sim, 4))
            for sim, a, b in sorted(pairs, key=lambda pair: -pair[0])]


@dataclass
class _Forest:
    """One tenant's topics and unplaced rows after its last cycle, with per-batch counts."""

    topics: dict[str, Topic] = field(default_factory=dict)
    unplaced: list[int] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    per_batch: list[BatchFigures] = field(default_factory=list)
    left_per_batch: list[int] = field(default_factory=list)
    #: Rows given their real kept vector so far, and the imputed vectors of rows the cascade placed.
    paid: set[int] = field(default_factory=set)
    imputed: dict[str, dict[str, np.ndarray]] = field(default_factory=lambda: defaultdict(dict))
    stages: Counter[str] = field(default_factory=Counter)


def _embedded(embed: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str],
              rows: set[int]) -> list[np.ndarray | None]:
    """Vectors of the ``rows`` of ``texts`` (one call), None for the others."""
    chosen = sorted(rows)
    out: list[np.ndarray | None] = [None] * len(texts)
    if chosen:
        for row, vector in zip(chosen, np.asarray(embed([texts[r] for r in chosen]), dtype=np.float32),
                               strict=True):
            out[row] = vector
    return out


def evaluate_topics(items: Sequence[EvalItem], embedder: EmbedderResource, params: PlacementParams,
                    e5_languages: Sequence[str] = DEFAULT_E5_LANGUAGES, e5_params: PlacementParams = E5_PARAMS,
                    kept: Callable[[Sequence[str]], np.ndarray] = kept_embed,
                    combined_languages: Sequence[str] = DEFAULT_COMBINED_LANGUAGES,
                    combined_params: PlacementParams = COMBINED_PARAMS,
                    cross: CrossParams | None = CROSS_PARAMS,
                    advisor: PlacementAdvisor | None = None,
                    cascade: CascadeParams | None = CASCADE_PARAMS) -> TopicReport:
    """Each tenant, and within it each language, is planned on its own, as the assets do: in the
    embedder's space with ``params``, for ``e5_languages`` in the multilingual-e5 space with
    ``e5_params``, for ``combined_languages`` in the combined (topic encoder) space with
    ``combined_params``, both from ``kept`` vectors (e5 ⊕ topic encoder, as the assets keep them);
    with ``cross``, a memory that fits no topic of its language may join the other's
    (``placement.plan_languages``). With ``advisor``, an LLM then places the memories each plan is
    unsure of (``llm_placement``), shown the earlier batches' topics with offline names. With
    ``cascade`` on, a memory of a kept-vector space without its vector yet is first routed in the
    embedder's space (``cascade.route``): a clear one takes its topic's vector instead of its own,
    as the assets do; ``stages`` counts them."""
    if set(e5_languages) & set(combined_languages):
        raise ValueError("a language is in one topic space: e5 or combined, not both")
    ids = [f"m{i}" for i in range(len(items))]
    langs = languages(item.text for item in items)
    texts = [item.text for item in items]
    spaces = {lang: space_of(lang, e5_languages, combined_languages) for lang in sorted(set(langs.tolist()))}
    across = cross is not None and all(to_shared(space) is not None for space in spaces.values())
    # Each space holds its languages' texts (every text when memories may join the other language).
    rows_of = {space: (np.arange(len(texts)) if across
                       else np.flatnonzero([spaces[str(lang)] == space for lang in langs]))
               for space in set(spaces.values())}
    main = _embedded(embedder.embed, texts, {int(r) for space, rows in rows_of.items() if space == MAIN_SPACE
                                             for r in rows})
    kept_parts = _embedded(kept, texts, {int(r) for space, rows in rows_of.items() if space in NEEDS_E5 for r in rows})
    vectors = {space: np.stack(in_spaces([space] * len(rows), [main[int(r)] for r in rows],
                                         [kept_parts[int(r)] for r in rows]))
               for space, rows in rows_of.items()}
    position = {space: {ids[int(r)]: k for k, r in enumerate(rows)} for space, rows in rows_of.items()}

    def params_of(lang: str) -> PlacementParams:
        space = spaces.get(lang, MAIN_SPACE)
        return combined_params if is_encoder_space(space) else e5_params if space == E5_SPACE else params

    row_of = {memory: row for row, memory in enumerate(ids)}
    batches = sorted({item.batch for item in items})
    index = PhraseIndex(texts) if advisor is not None else None

    def describe(forest: dict[str, Topic], wanted: Sequence[str]) -> dict[str, TopicOption]:
        assert index is not None and advisor is not None
        out = {}
        for tid in wanted:
            rows = typical_first([row_of[m] for m in forest[tid].children], index)
            named = phrase_summary(texts, rows, index, forest[tid].language)
            out[tid] = TopicOption(id=tid, name=named.key, summary=named.value,
                                   examples=[texts[row] for row in rows[:advisor.examples]])
        return out

    cheap = (np.asarray(embedder.embed(texts), dtype=np.float32)
             if cascade is not None and any(space in NEEDS_E5 for space in spaces.values()) else None)

    def lookup(lang: str, forest: _Forest) -> Callable[[Sequence[str]], np.ndarray]:
        space = spaces[lang]
        imputed = forest.imputed[lang]
        return lambda members: np.array([imputed[m] if m in imputed else vectors[space][position[space][m]]
                                         for m in members])

    def routed(forest: _Forest, lang: str, pool: list[int]) -> dict[int, str | None]:
        """The cascade over one language's pool: imputes the clear rows, marks the others paid;
        returns each routed row's cheap nearest existing topic (None: a new group or none)."""
        todo = [r for r in pool if langs[r] == lang and r not in forest.paid]
        for r in todo:
            forest.imputed[lang].pop(ids[r], None)
        if cheap is None or cascade is None or not cascade.enabled or spaces[lang] not in NEEDS_E5 or not todo:
            forest.paid.update(todo)
            return {}
        leaves = sorted(t for t, topic in forest.topics.items() if topic.level == 1 and topic.language == lang)

        def root(tid: str) -> str:
            while (parent := forest.topics[tid].parent) is not None:
                tid = parent
            return tid

        anchors = Anchors(leaves, np.array([cheap[[row_of[m] for m in forest.topics[t].children]].mean(axis=0)
                                            for t in leaves]).reshape(len(leaves), cheap.shape[1]),
                          [root(t) for t in leaves])
        routing = route(anchors, cheap[todo], lang, cascade)
        space = spaces[lang]
        real = {k: vectors[space][position[space][ids[todo[k]]]] for k in routing.paid}
        means = {t: forest.topics[t].vector_sum / max(forest.topics[t].member_count, 1) for t in leaves}
        for k, vector in impute(routing, means, real).items():
            forest.imputed[lang][ids[todo[k]]] = vector
        forest.paid.update(todo[k] for k in routing.paid)
        forest.stages["cheap"] += len(routing.clear)
        forest.stages["paid"] += len(routing.paid)
        return {todo[k]: routing.anchor[k] for k in routing.paid if routing.anchor[k] in means}

    def place(rows: Sequence[int]) -> _Forest:
        forest = _Forest()
        seen = 0
        for batch in batches:
            new = [row for row in rows if items[row].batch == batch]
            pool = forest.unplaced + new
            seen += len(new)
            topics: dict[str, Topic] = {}
            left: list[int] = []
            reasons = Counter[str]()
            created = grown = refreshed = 0
            pools = {}
            nearest: dict[int, str | None] = {}
            for lang in sorted({str(langs[r]) for r in pool} | {t.language for t in forest.topics.values()}):
                nearest.update(routed(forest, lang, pool))
                members = [ids[r] for r in pool if langs[r] == lang]
                pools[lang] = LanguagePool({tid: t for tid, t in forest.topics.items() if t.language == lang},
                                           members, lookup(lang, forest)(members), params_of(lang),
                                           lookup(lang, forest), to_shared(spaces[lang]))
            for lang, plan in plan_languages(pools, cross if across else None).items():
                if advisor is not None:
                    planned = pools[lang]
                    advisor.revise(dict(planned.topics), plan, planned.ids, planned.vectors,
                                   [texts[row_of[m]] for m in planned.ids],
                                   planned.params.max_members, planned.params.refresh_fraction,
                                   lambda wanted, before=dict(planned.topics): describe(before, wanted),
                                   planned.params.merge_similarity)
                topics.update(plan.topics)
                left.extend(row_of[m] for m in plan.set_aside)
                reasons.update(aside.reason for aside in plan.set_aside.values())
                created += len(plan.created)
                grown += len(plan.grown)
                refreshed += len(plan.refresh)
            forest.topics, forest.unplaced, forest.reasons = topics, left, reasons
            final = {m: tid for tid, t in topics.items() if t.level == 1 for m in t.children}
            forest.stages["changed"] += sum(1 for r, tid in nearest.items() if final.get(ids[r]) != tid)
            forest.left_per_batch.append(len(left))
            forest.per_batch.append(BatchFigures(
                batch=batch, memories=seen, placed=round(1 - len(left) / max(seen, 1), 4),
                topics=sum(1 for t in topics.values() if t.parent is None),
                created=created, grown=grown, refreshed=refreshed))
        return forest

    by_tenant: dict[str, list[int]] = defaultdict(list)
    for row, item in enumerate(items):
        by_tenant[item.tenant].append(row)
    forests = [place(rows) for _, rows in sorted(by_tenant.items())]
    return _report(items, ids, forests, params_of)


def fragmentation(roots_of_rows: Sequence[tuple[tuple[str, ...], str]]) -> tuple[int, float]:
    """From (theme, top-level topic) per placed memory, a theme being a label within one tenant and
    language: themes that are the majority label of two or more top-level topics, and the mean
    number of top-level topics per theme."""
    counts: dict[str, Counter[tuple[str, ...]]] = defaultdict(Counter)
    for theme, root in roots_of_rows:
        counts[root][theme] += 1
    homes = Counter(max(members.items(), key=lambda kv: (kv[1], kv[0]))[0] for members in counts.values())
    spans = Counter(theme for members in counts.values() for theme in members)
    if not spans:
        return 0, 0.0
    return sum(1 for n in homes.values() if n > 1), round(sum(spans.values()) / len(spans), 4)


def _report(items: Sequence[EvalItem], ids: list[str], forests: Sequence[_Forest],
            params_of: Callable[[str], PlacementParams]) -> TopicReport:
    from sklearn.metrics import (  # 1.5 s: on use
        adjusted_rand_score,
        normalized_mutual_info_score,
    )

    topics: dict[str, Topic] = {}
    for forest in forests:
        if topics.keys() & forest.topics.keys():
            raise ValueError("two tenants produced the same topic id")
        topics.update(forest.topics)
    reasons = sum((forest.reasons for forest in forests), Counter[str]())
    per_batch = []
    for k, figures in enumerate(zip(*(forest.per_batch for forest in forests), strict=True)):
        seen = sum(f.memories for f in figures)
        left = sum(forest.left_per_batch[k] for forest in forests)
        per_batch.append(BatchFigures(
            batch=figures[0].batch, memories=seen, placed=round(1 - left / max(seen, 1), 4),
            topics=sum(f.topics for f in figures), created=sum(f.created for f in figures),
            grown=sum(f.grown for f in figures), refreshed=sum(f.refreshed for f in figures)))
    row_of = {memory: row for row, memory in enumerate(ids)}
    truth = np.array([item.topic for item in items], dtype=object)
    leaf_of: dict[int, str] = {}
    root_of: dict[int, str] = {}
    for tid, topic in topics.items():
        if topic.level != 1:
            continue
        root = topic.parent or tid
        for member in topic.children:
            leaf_of[row_of[member]] = tid
            root_of[row_of[member]] = root
    placed_rows = sorted(leaf_of)
    by_leaf: dict[str, list[int]] = defaultdict(list)
    by_root: dict[str, list[int]] = defaultdict(list)
    for row in placed_rows:
        by_leaf[leaf_of[row]].append(row)
        by_root[root_of[row]].append(row)
    labels_true = truth[placed_rows].tolist()
    labels_leaf = [leaf_of[row] for row in placed_rows]
    split_themes, roots_per_theme = fragmentation(
        [((items[row].tenant, topics[root_of[row]].language, items[row].topic), root_of[row]) for row in placed_rows])
    dupes = sorted((pair for forest in forests for pair in near_duplicates(forest.topics, params_of)),
                   key=lambda pair: -pair.similarity)
    langs = languages(item.text for item in items)
    by_language = {}
    for lang in sorted(set(langs.tolist())):
        rows = set(np.flatnonzero(langs == lang).tolist())
        leaves = [np.array([r for r in members if r in rows]) for members in by_leaf.values()]
        by_language[lang] = LanguageFigures(
            memories=len(rows), placed=round(sum(1 for r in placed_rows if r in rows) / len(rows), 4),
            purity=round(purity([leaf for leaf in leaves if len(leaf)], truth), 4))
    return TopicReport(
        memories=len(items), labels=len(set(truth.tolist())), tenants=len(forests), batches=len(per_batch),
        placed=round(len(placed_rows) / max(len(items), 1), 4),
        purity=round(purity([np.array(r) for r in by_leaf.values()], truth), 4),
        ari=round(float(adjusted_rand_score(labels_true, labels_leaf)), 4) if placed_rows else 0.0,
        nmi=round(float(normalized_mutual_info_score(labels_true, labels_leaf)), 4) if placed_rows else 0.0,
        root_purity=round(purity([np.array(r) for r in by_root.values()], truth), 4),
        topics=sum(1 for t in topics.values() if t.parent is None),
        sub_topics=sum(1 for t in topics.values() if t.level == 1),
        near_duplicate_pairs=len(dupes), near_duplicates=dupes[:10],
        split_themes=split_themes, roots_per_theme=roots_per_theme,
        set_aside_reasons=dict(reasons), by_language=by_language, per_batch=per_batch,
        stages=dict(sum((forest.stages for forest in forests), Counter[str]())),
    )


def report_json(report: TopicReport) -> str:
    return json.dumps(report.model_dump(), ensure_ascii=False)

