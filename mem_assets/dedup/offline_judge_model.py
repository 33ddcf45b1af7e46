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
from mem_assets.dedup.relations import Label, ModelKind
from mem_resources import bge, model_passes
from mem_resources.bge import Language
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.memory_model import normalize_text
from mem_resources.settings import DEFAULT_MODELS_DIR

MODEL_DIR = Path(__file__).parent / "models"
MODEL_NAMES: dict[ModelKind, str] = {"accurate": "judge-v13", "fast": "judge-v2"}
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
    def _steps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Children with every leaf its own child (a row that reached one stays there), split
        features (0 at leaves), and the depth, at most 64 levels."""
        nodes, leaf = np.arange(len(self.left)), self.left < 0
        depth, level = 0, [0]
        while level := [child for node in level if self.left[node] >= 0
                        for child in (self.left[node], self.right[node])]:
            depth += 1
        return (np.where(leaf, nodes, self.left), np.where(leaf, nodes, self.right), np.maximum(self.feature, 0),
                min(depth, 64))

    def predict_columns(self, columns: np.ndarray) -> np.ndarray:
        """Leaf values for the rows of ``features`` given as ``columns`` = features.T, C-contiguous
        (made once for all trees, so each level reads a few feature rows in order)."""
        left, right, feature, depth = self._steps
        count = columns.shape[1]
        flat, offsets = columns.ravel(), np.arange(count)
        node = np.zeros(count, dtype=np.int64)
        for _ in range(depth):
            go_left = flat[feature[node] * count + offsets] <= self.threshold[node]
            node = np.where(go_left, left[node], right[node])
        return self.value[node]


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

    @property
    def cross(self) -> bool:
        """Whether the trees read ``CROSS_FEATURE_NAMES``."""
        return bool(self.cross_encoders)

    @model_passes.counted(lambda self, features: f"{self.fingerprint.split(':')[0]} trees", items=1)
    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Class probabilities (columns in ``classes`` order), as scikit-learn's predict_proba."""
        features = np.atleast_2d(features)
        scores = np.tile(self.init, (len(features), 1))
        columns = np.ascontiguousarray(features.T)
        for per_class in self.trees:
            for k, tree in enumerate(per_class):
                scores[:, k] += self.learning_rate * tree.predict_columns(columns)
        scores -= scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(axis=1, keepdims=True)

    def pair_probabilities(self, forward: np.ndarray, backward: np.ndarray) -> np.ndarray:
        """Probabilities of (older, newer) pairs from their features in both orders: being the
        same fact does not depend on which text is newer, so P(redundant) is the mean of both
        orders (a judgment is then stable when two texts share a timestamp); P(contradictory) is
        the forward one, since a contradiction is read as "b replaces a"."""
        return symmetrize(self.probabilities(forward), self.probabilities(backward), self.classes)

    def near_misses(self, probabilities: np.ndarray, band: float,
                    chinese: np.ndarray | None = None) -> list[tuple[Label, float] | None]:
        """Per row: the label a pair nearly got — P(redundant) or P(contradictory) at least its
        threshold minus ``band`` (the larger margin first) — or None. Only meaningful for rows
        ``decide`` left independent; ``band`` 0 finds none."""
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
                if band > 0 and p >= threshold - band]
            near.append(max(close)[1:] if close else None)
        return near

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
    """Pairs a cheaper ``model`` (over ``FEATURE_NAMES`` only) calls clearly independent — both
    P(redundant) and P(contradictory) under ``below`` — are answered independent without the
    expensive features. It can only turn a redundant or contradictory decision into independent,
    never add a merge or a supersede: precision is kept, some recall is traded for speed."""

    model: JudgeModel
    name: str
    below: float

    @property
    def fingerprint(self) -> str:
        return f"gate:{self.model.fingerprint}<{self.below}"

    def closed(self, probabilities: np.ndarray) -> np.ndarray:
        """Which (symmetrized) probability rows are clearly independent."""
        redundant = probabilities[:, self.model.classes.index("redundant")]
        contradictory = probabilities[:, self.model.classes.index("contradictory")]
        return (redundant < self.below) & (contradictory < self.below)

    def reason(self, row: np.ndarray) -> str:
        r, c = (float(row[self.model.classes.index(k)]) for k in ("redundant", "contradictory"))
        return (f"gated by {self.name}: P(redundant) = {r:.3f}, P(contradictory) = {c:.3f}, both under "
                f"{self.below}: clearly independent, e5 not read")


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

    @property
    def reason(self) -> str:
        return self.gated or self.overruled or f"judge model: P({self.label}) = {self.probability:.2f}"


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
def gate(kind: ModelKind = "accurate") -> Gate | None:
    """The shipped gate in front of model ``kind`` (``GATES``), if it has one."""
    if kind not in GATES:
        return None
    gate_kind, below = GATES[kind]
    return Gate(load(gate_kind), MODEL_NAMES[gate_kind], below)


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
            band: float = 0.0) -> list[Decision]:
    """Label (older, newer) text pairs with the shipped model.
    Texts equal after normalisation (the pipeline's exact duplicates) are redundant outright.
    ``features_of``: a featurizer (of the model's kind) shared across calls. ``gate``: pairs it
    closes are independent without the model's deep features (their texts are not embedded for
    them). ``band``: a pair the model leaves independent within this of a threshold is marked
    ``near`` (``JudgeModel.near_misses``) for the review queue; its label stays independent."""
    model = model or load()
    decided: list[Decision | None] = [
        Decision("redundant", 1.0) if normalize_text(a) == normalize_text(b) else None for a, b in pairs]
    rest = [pair for pair, known in zip(pairs, decided, strict=True) if known is None]
    if rest:
        features_of = features_of or featurizer(model.deep, aligned=model.aligned, cross=tuple(model.cross_encoders))
        count = len(rest)
        cheap = features_of.cheap([*rest, *((b, a) for a, b in rest)])
        judged: list[Decision | None] = [None] * count
        opened = np.arange(count)
        if gate is not None:
            gated = gate.model.pair_probabilities(cheap[:count], cheap[count:])
            closed = gate.closed(gated)
            independent = gate.model.classes.index("independent")
            for i in np.flatnonzero(closed):
                judged[i] = Decision("independent", float(gated[i, independent]), gate.reason(gated[i]))
            opened = np.flatnonzero(~closed)
        if len(opened):
            subset = [rest[i] for i in opened]
            features = features_of.with_deep([*subset, *((b, a) for a, b in subset)],
                                             cheap[np.concatenate([opened, opened + count])])
            probabilities = model.pair_probabilities(features[:len(subset)], features[len(subset):])
            chinese = both_chinese(features[:len(subset)])
            independent = model.classes.index("independent")
            near = model.near_misses(probabilities, band, chinese)
            for k, (i, (label, p)) in enumerate(zip(opened, model.decide(probabilities, chinese), strict=True)):
                if label != "independent" and dated_events(*rest[i]):
                    judged[i] = Decision("independent", float(probabilities[k, independent]),
                                         overruled=f"two dated events, not an update: P({label}) = {p:.2f} overruled")
                elif label == "independent" and near[k] is not None:
                    judged[i] = Decision(label, p, near=near[k][0], near_probability=round(near[k][1], 4))
                else:
                    judged[i] = Decision(label, p)
        remaining = iter(judged)
        decided = [known or next(remaining) for known in decided]
    return decided  # type: ignore[return-value]
