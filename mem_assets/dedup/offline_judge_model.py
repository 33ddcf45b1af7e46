"""The learned offline judge: a gradient-boosted tree ensemble over pair features.

Trained with scikit-learn (``python -m research.training.judge_trees``) and shipped as plain JSON
(the trees' split features, thresholds and leaf values) under ``models/``, so loading needs no
pickle and gives the same numbers under any scikit-learn version. Precision first: a pair is
redundant only when P(redundant) clears ``thresholds["redundant"]`` (pairs of two Chinese texts:
``thresholds["redundant_zh"]`` when the model has one), contradictory only when P(contradictory)
clears ``thresholds["contradictory"]``, otherwise independent; the thresholds are chosen on
cross-validated training predictions so that wrong merges plus wrong supersedes stay under the
documented budget (see ``training``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

import numpy as np

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup.offline_judge_features import (
    ALIGNED_FEATURE_NAMES,
    CROSS_FEATURE_NAMES,
    DEEP_FEATURE_NAMES,
    FEATURE_NAMES,
    PairFeaturizer,
    dated_events,
)
from mem_assets.dedup.relations import CascadeStage, Label, ModelKind
from mem_resources import bge, model_passes
from mem_resources.bge import Language
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.memory_model import normalize_text
from mem_resources.settings import DEFAULT_MODELS_DIR

MODEL_DIR = Path(__file__).parent / "models"
MODEL_NAMES: dict[ModelKind, str] = {"accurate": "judge-v13", "middle": "judge-mid-v1", "fast": "judge-v2"}
"""``accurate`` also reads multilingual-e5 (``DEEP_FEATURE_NAMES``: ~17 ms per distinct text of
the candidate pairs on two cores), bge-small token states (``ALIGNED_FEATURE_NAMES``: ~3 ms per
distinct text) and the cross-encoder of the pair's language (``CROSS_FEATURE_NAMES``: two runs per
pair); ``fast`` reads static word vectors only (~0.5 ms per pair)."""
FEATURE_SETS = (FEATURE_NAMES, FEATURE_NAMES + DEEP_FEATURE_NAMES, FEATURE_NAMES + DEEP_FEATURE_NAMES
                + ALIGNED_FEATURE_NAMES, FEATURE_NAMES + DEEP_FEATURE_NAMES + ALIGNED_FEATURE_NAMES + CROSS_FEATURE_NAMES)

OVERRULES = "dated-events-v1"
"""Versions the rule that turns a merge or supersede of two dated events into independent
(``pair_features.dated_events``); part of the judge fingerprint."""

GATES: dict[ModelKind, tuple[ModelKind, float]] = {"accurate": ("fast", 0.09)}
"""The accurate judge skips e5 for a pair the fast model calls clearly independent: P(redundant)
and P(contradictory) both under the bound, the largest on a 0.01 grid that loses at most 2% of the
accurate judge's redundant / contradictory decisions out of fold on the training pairs
(``research/studies/judge_gate_study.py``; chosen again for judge-v13: ``research/studies/judge_gate_v13_rule.md``)."""

CASCADES: dict[ModelKind, tuple[float | None, float | None]] = {"accurate": (None, None)}
"""The other side of the cascade: a pair the gate's model is sure is a repeat (P(redundant) at
least the first bound) or a contradiction (P(contradictory) at least the second) gets that label
without the accurate stage; None: that side is off. Chosen out of fold on the training pairs
(``research/studies/judge_cascade_rule.md``)."""

MIDDLES: dict[ModelKind, tuple[ModelKind, float | None, float | None, float | None]] = {
    "accurate": ("middle", 0.08, 0.98, 0.99)}
"""The cascade's middle stage: for a pair the fast gate left open, the middle model (trees over
``FEATURE_NAMES`` + ``DEEP_FEATURE_NAMES``: the pair's e5 vectors, no bge-small, no
cross-encoder) answers independent when P(redundant) and P(contradictory) are both under the
first bound, redundant from the second, contradictory from the third (None: that side is off);
only the rest pay the accurate stage. The widest bounds at which, on the training pairs (out of
fold) and the real-conversation training pairs, the cascade decides as without it on >= 99 % of
pairs, adds no wrong merge or supersede and loses <= 0.005 F1 (``research/studies/judge_middle_rule.md``)."""

def model_file(kind: ModelKind = "accurate") -> Path:
    return MODEL_DIR / f"{MODEL_NAMES[kind]}.json"


@dataclass(frozen=True)
class Tree:
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray

    @cached_property
    def steps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Children with every leaf its own child (a row that reached one stays there), split
        features (0 at leaves), and the depth, at most 64 levels."""
        nodes, leaf = np.arange(len(self.left)), self.left < 0
        depth, level = 0, [0]
        while level := [child for node in level if self.left[node] >= 0
                        for child in (self.left[node], self.right[node])]:
            depth += 1
        return (np.where(leaf, nodes, self.left), np.where(leaf, nodes, self.right), np.maximum(self.feature, 0),
                min(depth, 64))


@dataclass(frozen=True)
class Forest:
    """Every tree of a model in one set of arrays (node ids global, each tree's root in
    ``roots``), so a level of all trees for all rows is a few array operations rather than a
    few per tree: judge-v13's 900 trees 0.27 → 0.06 ms a pair in a fleet night."""

    roots: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    depth: int

    @classmethod
    def of(cls, trees: Sequence[Tree]) -> Forest:
        lefts, rights, features, depths = zip(*(tree.steps for tree in trees), strict=True)
        roots = np.concatenate([[0], np.cumsum([len(left) for left in lefts])[:-1]])
        return cls(roots, np.concatenate([left + root for left, root in zip(lefts, roots, strict=True)]),
                   np.concatenate([right + root for right, root in zip(rights, roots, strict=True)]),
                   np.concatenate(features), np.concatenate([tree.threshold for tree in trees]),
                   np.concatenate([tree.value for tree in trees]), max(depths))

    def leaf_values(self, columns: np.ndarray) -> np.ndarray:
        """Per tree (rows) and pair (columns), the value of the leaf the pair reaches; ``columns``
        = features.T, C-contiguous. A pair that reached a leaf stays there (``Tree.steps``)."""
        count = columns.shape[1]
        flat, offsets = columns.ravel(), np.arange(count)
        node = np.repeat(self.roots[:, None], count, axis=1)
        for _ in range(self.depth):
            go_left = flat[self.feature[node] * count + offsets] <= self.threshold[node]
            node = np.where(go_left, self.left[node], self.right[node])
        return self.value[node]


#: Pairs read by the forest at once: its node matrix is trees x pairs.
FOREST_CHUNK = 512


@dataclass(frozen=True)
class JudgeModel:
    classes: tuple[str, ...]
    init: np.ndarray
    learning_rate: float
    trees: tuple[tuple[Tree, ...], ...]
    thresholds: dict[str, float]
    fingerprint: str
    deep: bool
    aligned: bool = False
    cross_encoders: Mapping[Language, str] = field(default_factory=dict)
    """The sha256 of each cross-encoder file the trees were trained with, by pair language."""

    @cached_property
    def _forest(self) -> Forest:
        return Forest.of([tree for per_class in self.trees for tree in per_class])

    @property
    def cross(self) -> bool:
        """Whether the trees read ``CROSS_FEATURE_NAMES``."""
        return bool(self.cross_encoders)

    @model_passes.counted(lambda self, features: f"{self.fingerprint.split(':')[0]} trees", items=1)
    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Class probabilities (columns in ``classes`` order), as scikit-learn's predict_proba."""
        features = np.atleast_2d(features)
        scores = np.tile(self.init, (len(features), 1))
        classes = len(self.classes)
        for start in range(0, len(features), FOREST_CHUNK):
            chunk = scores[start:start + FOREST_CHUNK]
            leaves = self._forest.leaf_values(np.ascontiguousarray(features[start:start + FOREST_CHUNK].T))
            for stage in range(len(self.trees)):
                chunk += self.learning_rate * leaves[stage * classes:(stage + 1) * classes].T
        scores -= scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(axis=1, keepdims=True)

    def pair_probabilities(self, forward: np.ndarray, backward: np.ndarray) -> np.ndarray:
        """Probabilities of (older, newer) pairs from their features in both orders: being the
        same fact does not depend on which text is newer, so P(redundant) is the mean of both
        orders (a judgment is then stable when two texts share a timestamp); P(contradictory) is
        the forward one, since a contradiction is read as "b replaces a"."""
        return symmetrize(self.probabilities(forward), self.probabilities(backward), self.classes)

    def needs_reverse(self, forward: np.ndarray, band: Mapping[str, float], chinese: np.ndarray) -> np.ndarray:
        """Which pairs need their (newer, older) reading, from the (older, newer) probabilities
        alone: P(redundant) is the mean of both readings, so under (forward + 1) / 2 whatever the
        other says, and P(contradictory) is at most the forward one. A pair whose bounds stay under
        both thresholds minus ``band`` (``near_misses``) is independent and near nothing either way;
        only the others pay the second cross-encoder run, with the same decisions as reading both."""
        forward = np.atleast_2d(forward)
        redundant = forward[:, self.classes.index("redundant")]
        contradictory = forward[:, self.classes.index("contradictory")]
        bars = redundant_thresholds(self.thresholds, chinese)
        return (((redundant + 1) / 2 >= bars - band.get("redundant", 0.0))
                | (contradictory >= self.thresholds["contradictory"] - band.get("contradictory", 0.0)))

    def near_misses(self, probabilities: np.ndarray, band: Mapping[str, float],
                    chinese: np.ndarray | None = None) -> list[tuple[Label, float] | None]:
        """Per row: the label a pair nearly got — P(redundant) or P(contradictory) at least its
        threshold minus that label's ``band`` (the larger margin first) — or None. Only meaningful
        for rows ``decide`` left independent; a band of 0 (or none given) finds none."""
        probabilities = np.atleast_2d(probabilities)
        index = {c: i for i, c in enumerate(self.classes)}
        bars = redundant_thresholds(self.thresholds, np.zeros(len(probabilities), bool) if chinese is None else chinese)
        near: list[tuple[Label, float] | None] = []
        for row, bar in zip(probabilities, bars, strict=True):
            redundant, contradictory = float(row[index["redundant"]]), float(row[index["contradictory"]])
            close: list[tuple[float, Label, float]] = [
                (p - threshold, label, p) for label, p, threshold in (
                    ("redundant", redundant, float(bar)),
                    ("contradictory", contradictory, self.thresholds["contradictory"]))
                if band.get(label, 0.0) > 0 and p >= threshold - band[label]]
            near.append(max(close)[1:] if close else None)
        return near

    def doubts(self, decided: Sequence[tuple[Label, float]], reach: Mapping[str, float],
               chinese: np.ndarray | None = None) -> list[bool]:
        """Per ``decide``d row: a redundant or contradictory decision the model is not sure enough
        of to act on alone when an LLM can confirm it: P under t + ``reach[label]`` × (1 − t), a
        share of the room above its threshold t (the LLM may confirm it or settle it
        independent). A reach of 1: every decision of that label; 0 (or none given): none."""
        bars = redundant_thresholds(self.thresholds, np.zeros(len(decided), bool) if chinese is None else chinese)
        out = []
        for (label, p), bar in zip(decided, bars, strict=True):
            t = float(bar) if label == "redundant" else self.thresholds["contradictory"]
            share = reach.get(label, 0.0) if label != "independent" else 0.0
            out.append(share > 0 and (share >= 1 or p < t + share * (1 - t)))
        return out

    def decide(self, probabilities: np.ndarray, chinese: np.ndarray | None = None) -> list[tuple[Label, float]]:
        """Precision-first labels: independent unless a class clears its threshold. ``chinese``:
        which pairs are of two Chinese texts (the ``zh`` feature); None: none."""
        probabilities = np.atleast_2d(probabilities)
        index = {c: i for i, c in enumerate(self.classes)}
        bars = redundant_thresholds(self.thresholds, np.zeros(len(probabilities), bool) if chinese is None else chinese)
        decided: list[tuple[Label, float]] = []
        for row, bar in zip(probabilities, bars, strict=True):
            redundant, contradictory = row[index["redundant"]], row[index["contradictory"]]
            if redundant >= bar and redundant >= contradictory:
                decided.append(("redundant", float(redundant)))
            elif contradictory >= self.thresholds["contradictory"]:
                decided.append(("contradictory", float(contradictory)))
            else:
                decided.append(("independent", float(row[index["independent"]])))
        return decided


def both_chinese(features: np.ndarray) -> np.ndarray:
    """Which feature rows are pairs of two Chinese texts (the ``zh`` feature)."""
    return features[:, FEATURE_NAMES.index("zh")] == 1


def redundant_thresholds(thresholds: Mapping[str, float], chinese: np.ndarray) -> np.ndarray:
    """The redundant threshold of each pair: ``redundant_zh`` for pairs of two Chinese texts when
    the model has one (training.py's real-conversation raise is English evidence)."""
    return np.where(chinese, thresholds.get("redundant_zh", thresholds["redundant"]), thresholds["redundant"])


@dataclass(frozen=True)
class Gate:
    """A cheaper stage of a cascade: a cheaper ``model`` (the fast model over ``FEATURE_NAMES``, or
    the middle one that adds ``DEEP_FEATURE_NAMES``) answers the pairs it is sure of, the costly
    model's features (``skipped``) are made only for the rest. Pairs it calls
    clearly independent — both P(redundant) and P(contradictory) under ``below`` — are
    independent; with ``redundant_from`` / ``contradictory_from`` (the cascade's other side), a
    pair whose P(redundant) (and at least its P(contradictory)) or P(contradictory) reaches it
    gets that label. The bounds are chosen so that it changes few of the costly model's
    decisions and adds no wrong resolution on the training pairs (``CASCADES``)."""

    model: JudgeModel
    name: str
    below: float
    redundant_from: float | None = None
    contradictory_from: float | None = None
    skipped: str = "e5"

    @property
    def fingerprint(self) -> str:
        sure = "".join(f">{side[0]}{bound}" for side, bound in (("redundant", self.redundant_from),
                                                                 ("contradictory", self.contradictory_from))
                       if bound is not None)
        return f"gate:{self.model.fingerprint}<{self.below}{sure}"

    def closed(self, probabilities: np.ndarray) -> np.ndarray:
        """Which (symmetrized) probability rows are clearly independent."""
        redundant = probabilities[:, self.model.classes.index("redundant")]
        contradictory = probabilities[:, self.model.classes.index("contradictory")]
        return (redundant < self.below) & (contradictory < self.below)

    def answers(self, probabilities: np.ndarray) -> list[Label | None]:
        """Per (symmetrized) row, the label the cheap stage is sure of, or None: the costly model decides."""
        redundant = probabilities[:, self.model.classes.index("redundant")]
        contradictory = probabilities[:, self.model.classes.index("contradictory")]
        sure_redundant = (redundant >= self.redundant_from) & (redundant >= contradictory) \
            if self.redundant_from is not None else np.zeros(len(probabilities), bool)
        sure_contradictory = ~sure_redundant & (contradictory >= self.contradictory_from) \
            if self.contradictory_from is not None else np.zeros(len(probabilities), bool)
        return ["independent" if closed else "redundant" if r else "contradictory" if c else None
                for closed, r, c in zip(self.closed(probabilities), sure_redundant, sure_contradictory, strict=True)]

    def reason(self, row: np.ndarray, label: Label = "independent") -> str:
        r, c = (float(row[self.model.classes.index(k)]) for k in ("redundant", "contradictory"))
        said = f"gated by {self.name}: P(redundant) = {r:.3f}, P(contradictory) = {c:.3f}"
        if label == "redundant":
            return f"{said}, P(redundant) at least {self.redundant_from}: clearly a repeat, {self.skipped} not read"
        if label == "contradictory":
            return (f"{said}, P(contradictory) at least {self.contradictory_from}: clearly a contradiction, "
                    f"{self.skipped} not read")
        return f"{said}, both under {self.below}: clearly independent, {self.skipped} not read"


@dataclass(frozen=True)
class Decision:
    label: Label
    probability: float
    gated: str | None = None
    """Why the gate answered (None: the model itself decided)."""
    overruled: str | None = None
    """Why the model's merge or supersede was turned into independent (``dated_events``)."""
    near: Label | None = None
    """Left independent, but this label's probability was within the review band of its threshold."""
    near_probability: float | None = None
    stage: CascadeStage = "accurate"
    """Which stage of the cascade answered: ``exact`` (equal texts), ``fast`` (the gate's model
    was sure), ``middle`` (the middle gate's model was sure) or ``accurate`` (the model itself;
    also without a gate)."""
    fast_label: Label | None = None
    """For a pair a later stage (``middle`` or ``accurate``) decided behind a gate: what the
    gate's model alone would have said at its own thresholds (so a run can count what a later
    stage changed)."""
    middle_label: Label | None = None
    """For a pair the ``accurate`` stage decided behind the middle gate: what the middle model
    alone would have said at its own thresholds."""
    doubtful: bool = False
    """Decided redundant or contradictory, but within the review band above its threshold."""
    one_order: bool = False
    """Independent from the (older, newer) reading alone (``JudgeModel.needs_reverse``):
    ``probability`` is then the least P(independent) the other reading could leave."""

    @property
    def reason(self) -> str:
        if self.one_order:
            return (f"judge model: P(independent) >= {self.probability:.2f}, read older-first only: "
                    "the newer-first reading could not make it a repeat or a review case")
        return self.overruled or self.gated or f"judge model: P({self.label}) = {self.probability:.2f}"


def symmetrize(forward: np.ndarray, backward: np.ndarray, classes: Sequence[str]) -> np.ndarray:
    r, c, i = (classes.index(k) for k in ("redundant", "contradictory", "independent"))
    out = np.empty_like(forward)
    out[:, r] = (forward[:, r] + backward[:, r]) / 2
    out[:, c] = forward[:, c]
    out[:, i] = np.clip(1 - out[:, r] - out[:, c], 0, None)
    return out / out.sum(axis=1, keepdims=True)


def model_from_json(text: str, fingerprint: str) -> JudgeModel:
    spec = json.loads(text)
    features = tuple(spec["features"])
    if features not in FEATURE_SETS:
        raise ValueError("judge model was trained on other features: retrain it with "
                         "`python -m research.training.judge_trees`")
    cross_encoders = dict(spec.get("cross_encoders", {}))
    if (CROSS_FEATURE_NAMES[0] in features) != bool(cross_encoders):
        raise ValueError("judge model's cross-encoder columns and its recorded cross-encoder files disagree: "
                         "retrain it with `python -m research.training.judge_trees`")
    trees = tuple(tuple(Tree(*(np.asarray(t[key]) for key in ("left", "right", "feature", "threshold", "value")))
                        for t in stage) for stage in spec["trees"])
    return JudgeModel(tuple(spec["classes"]), np.asarray(spec["init"], dtype=np.float64),
                      float(spec["learning_rate"]), trees, dict(spec["thresholds"]), fingerprint,
                      deep=features != FEATURE_NAMES, aligned=ALIGNED_FEATURE_NAMES[0] in features,
                      cross_encoders=cross_encoders)


@cache
def load(kind: ModelKind = "accurate") -> JudgeModel:
    """A shipped model; its fingerprint (file name + sha256) keys the judgment cache."""
    path = model_file(kind)
    raw = path.read_bytes()
    model = model_from_json(raw.decode("utf-8"), f"{path.stem}:{hashlib.sha256(raw).hexdigest()[:16]}")
    for language, sha256 in model.cross_encoders.items():
        if cross_encoder.sha256(language) != sha256:
            raise ValueError(f"{cross_encoder.MODEL_FILES[language].name} is not the file {path.name} was trained "
                             "with: restore it from git, or retrain both (docs/dedup.md, \"Retraining\")")
    return model


@cache
def middle_gate(kind: ModelKind = "accurate") -> Gate | None:
    """The shipped middle stage of model ``kind``'s cascade (``MIDDLES``), if it has one."""
    if kind not in MIDDLES:
        return None
    middle_kind, below, redundant_from, contradictory_from = MIDDLES[kind]
    return Gate(load(middle_kind), MODEL_NAMES[middle_kind], 0.0 if below is None else below, redundant_from,
                contradictory_from, skipped="bge-small and the cross-encoder")


@cache
def gate(kind: ModelKind = "accurate", cascade: bool = False) -> Gate | None:
    """The shipped gate in front of model ``kind`` (``GATES``), if it has one; with ``cascade``,
    with its sure-repeat and sure-contradiction sides too (``CASCADES``)."""
    if kind not in GATES:
        return None
    gate_kind, below = GATES[kind]
    redundant_from, contradictory_from = CASCADES.get(kind, (None, None)) if cascade else (None, None)
    return Gate(load(gate_kind), MODEL_NAMES[gate_kind], below, redundant_from, contradictory_from)


def featurizer(deep: bool = True, known_deep: Mapping[str, np.ndarray] | None = None, aligned: bool | None = None,
               models_dir: Path = DEFAULT_MODELS_DIR, cross: Sequence[Language] | None = None) -> PairFeaturizer:
    """A featurizer for the accurate (``deep``) or the fast model; it keeps every text it has
    parsed and embedded, so pairs judged in several batches embed each text once. ``known_deep``:
    e5 passage vectors of texts already embedded (kept on their nodes), not made again.
    ``aligned`` (default: as ``deep``): bge-small token features; ``cross``: the languages whose
    cross-encoder it reads (default: the shipped accurate model's with ``deep``, none without),
    reading the jars in ``models_dir``."""
    aligned = deep if aligned is None else aligned
    languages = (tuple(load("accurate").cross_encoders) if deep else ()) if cross is None else tuple(cross)
    return PairFeaturizer(wordllama_embed, e5_embed if deep else None, known_deep if deep else None,
                          (lambda language: bge.encoder(Path(models_dir), language)) if aligned else None,
                          {language: cross_encoder.load(Path(models_dir), language).probabilities
                           for language in languages} if languages else None)


def feature_matrix(pairs: Sequence[tuple[str, str]], deep: bool = True) -> np.ndarray:
    """Feature rows of (older, newer) pairs; each distinct text is parsed and embedded once."""
    return featurizer(deep).matrix(pairs)


def predict(pairs: Sequence[tuple[str, str]], model: JudgeModel | None = None,
            features_of: PairFeaturizer | None = None, gate: Gate | None = None,
            band: Mapping[str, float] | None = None, reach: Mapping[str, float] | None = None,
            middle: Gate | None = None, both_orders: bool = False) -> list[Decision]:
    """Label (older, newer) text pairs with the shipped model.
    Texts equal after normalisation (the pipeline's exact duplicates) are redundant outright.
    ``features_of``: a featurizer (of the model's kind) shared across calls. ``gate``: the pairs
    it is sure of (``Gate.answers``) are answered without the model's deep features (their texts
    are not embedded for them); the others record what the gate's model alone would have said.
    ``band``: by label, a pair the model leaves independent within this of its threshold is marked
    ``near`` (``JudgeModel.near_misses``) for the review queue; its label stays independent.
    ``reach``: by label, the share of the room above its threshold within which a decision of the
    model is ``doubtful`` (``JudgeModel.doubts``); None: none is. ``middle`` (a gate over the cheap
    and e5 columns, ``middle_gate``): of the pairs the gate left open, those it is sure of are
    answered without the model's bge-small and cross-encoder features; the others record what its
    model alone would have said. The model reads a pair newer-first too only where
    ``JudgeModel.needs_reverse`` leaves its decision open; the rest are ``one_order``, symmetrized
    as if that reading had said P(redundant) = 1 (the bound that could not change them);
    ``both_orders`` reads every pair both ways (every probability exact, for studies and the
    frozen-model test)."""
    model = model or load()
    decided: list[Decision | None] = [
        Decision("redundant", 1.0, stage="exact") if normalize_text(a) == normalize_text(b) else None
        for a, b in pairs]
    rest = [pair for pair, known in zip(pairs, decided, strict=True) if known is None]
    if rest:
        features_of = features_of or featurizer(model.deep, aligned=model.aligned, cross=tuple(model.cross_encoders))
        count = len(rest)
        cheap = features_of.cheap([*rest, *((b, a) for a, b in rest)])
        judged: list[Decision | None] = [None] * count
        opened = np.arange(count)
        fast_labels: list[Label | None] = [None] * count
        if gate is not None:
            gated = gate.model.pair_probabilities(cheap[:count], cheap[count:])
            answers = gate.answers(gated)
            for i, label in enumerate(answers):
                if label is not None:
                    p = float(gated[i, gate.model.classes.index(label)])
                    judged[i] = _decision(label, p, float(gated[i, gate.model.classes.index("independent")]),
                                          label != "independent" and dated_events(*rest[i]),
                                          gate.reason(gated[i], label), "fast")
            opened = np.array([i for i, label in enumerate(answers) if label is None], dtype=np.int64)
            fast_labels = [label for label, _ in gate.model.decide(gated, both_chinese(cheap[:count]))]
        middle_labels: dict[int, Label] = {}
        if middle is not None and len(opened):
            opened, middle_labels = _middle_stage(rest, cheap, opened, features_of, middle, fast_labels, judged)
        if len(opened):
            subset = [rest[i] for i in opened]
            features = features_of.with_deep(subset, cheap[opened])
            chinese = both_chinese(features)
            ahead = model.probabilities(features)
            behind = np.zeros_like(ahead)
            behind[:, model.classes.index("redundant")] = 1.0
            reread = np.ones(len(ahead), bool) if both_orders else model.needs_reverse(ahead, band or {}, chinese)
            if reread.any():
                behind[reread] = model.probabilities(features_of.with_deep(
                    [(b, a) for (a, b), again in zip(subset, reread, strict=True) if again],
                    cheap[opened[reread] + count]))
            probabilities = symmetrize(ahead, behind, model.classes)
            independent = model.classes.index("independent")
            near = model.near_misses(probabilities, band or {}, chinese)
            stage: CascadeStage = "accurate" if model.deep else "fast"
            decisions = model.decide(probabilities, chinese)
            doubts = model.doubts(decisions, reach or {}, chinese)
            for k, (i, (label, p)) in enumerate(zip(opened, decisions, strict=True)):
                fast, mid = fast_labels[i], middle_labels.get(int(i))
                dated = (label != "independent" or fast not in (None, "independent")
                         or mid not in (None, "independent")) and dated_events(*rest[i])
                fast = "independent" if dated and fast is not None else fast
                mid = "independent" if dated and mid is not None else mid
                if label != "independent" and dated:
                    judged[i] = _decision(label, p, float(probabilities[k, independent]), True, None, stage, fast, mid)
                elif label == "independent" and near[k] is not None:
                    judged[i] = Decision(label, p, near=near[k][0], near_probability=round(near[k][1], 4),
                                         stage=stage, fast_label=fast, middle_label=mid)
                else:
                    judged[i] = Decision(label, p, stage=stage, fast_label=fast, doubtful=doubts[k],
                                         middle_label=mid, one_order=not reread[k])
        remaining = iter(judged)
        decided = [known or next(remaining) for known in decided]
    return decided  # type: ignore[return-value]


def _middle_stage(rest: Sequence[tuple[str, str]], cheap: np.ndarray, opened: np.ndarray,
                  features_of: PairFeaturizer, middle: Gate, fast_labels: Sequence[Label | None],
                  judged: list[Decision | None]) -> tuple[np.ndarray, dict[int, Label]]:
    """The middle stage over the ``opened`` rows of ``rest``: fills ``judged`` where ``middle`` is
    sure; returns the rows still open and, for them, the middle model's own label."""
    count, subset = len(rest), [rest[i] for i in opened]
    rows = features_of.deep_rows([*subset, *((b, a) for a, b in subset)],
                                 cheap[np.concatenate([opened, opened + count])])
    probabilities = middle.model.pair_probabilities(rows[:len(subset)], rows[len(subset):])
    own = middle.model.decide(probabilities, both_chinese(rows[:len(subset)]))
    still, labels = [], {}
    for k, (i, label) in enumerate(zip(opened, middle.answers(probabilities), strict=True)):
        if label is None:
            still.append(int(i))
            labels[int(i)] = own[k][0]
            continue
        p, dated = float(probabilities[k, middle.model.classes.index(label)]), False
        fast = fast_labels[i]
        if label != "independent" or fast not in (None, "independent"):
            dated = dated_events(*rest[i])
        judged[i] = _decision(label, p, float(probabilities[k, middle.model.classes.index("independent")]),
                              dated and label != "independent", middle.reason(probabilities[k], label), "middle",
                              "independent" if dated and fast is not None else fast)
    return np.array(still, dtype=np.int64), labels


def _decision(label: Label, p: float, independent: float, dated: bool, gated: str | None,
              stage: CascadeStage, fast_label: Label | None = None, middle_label: Label | None = None) -> Decision:
    """``label`` as ``stage`` decided it, unless it merges or supersedes two ``dated`` events."""
    if label != "independent" and dated:
        return Decision("independent", independent, gated,
                        overruled=f"two dated events, not an update: P({label}) = {p:.2f} overruled", stage=stage,
                        fast_label=fast_label, middle_label=middle_label)
    return Decision(label, p, gated, stage=stage, fast_label=fast_label, middle_label=middle_label)
