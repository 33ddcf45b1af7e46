"""Judges: label a pair of memories redundant / contradictory / independent, and fuse them.

Two implementations behind one resource type, so assets never know which one runs:
``OfflineJudge`` (a learned model over pair features, no network; see
mem_assets/dedup/offline_judge_model.py) and
``OpenAIJudge`` (any OpenAI-compatible chat endpoint, each new memory with all its candidates,
several new memories a call). A judge that fails — transport error, HTTP status, a broken body,
an answer that cannot be read or does not validate, even after one more try — yields
``failed=True`` with label ``independent``: a failure never merges anything, and the node stays unchecked for the next run.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from dagster import ConfigurableResource
from pydantic import Field

from mem_assets.dedup.llm_judge_prompt import (
    FUSE_SYSTEM,
    JUDGE_SYSTEM,
    TOKENS_PER_VERDICT,
    GroupVerdict,
    JudgeRequest,
    MemoryRef,
    Reconciliation,
    call_batches,
    fuse_message,
    judge_message,
    verdict_schema,
)
from mem_assets.dedup.merging import carried_share, carries, carrying_source, informativeness
from mem_assets.dedup.relations import CascadeStage, Label, ModelKind, Stage
from mem_assets.dedup.superseding import says_it_continues
from mem_resources import bge
from mem_resources.embedder import E5_PASSAGE_SPACE
from mem_resources.llm import CallBudget, ChatUsage, OpenAIChatResource
from mem_resources.settings import (
    DEFAULT_CONFIRM_MERGES,
    DEFAULT_CONFIRM_SUPERSEDES,
    DEFAULT_JUDGE_MEMORIES_PER_CALL,
    DEFAULT_MODELS_DIR,
    DEFAULT_NEAR_CARRIED,
    DEFAULT_RESTATEMENTS,
    DEFAULT_REVIEW_BAND,
    Restatements,
)
from mem_resources.text import unsupported_words

if TYPE_CHECKING:
    from mem_assets.dedup.offline_judge_model import Gate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judgment:
    """``deferred``: not judged (the run's deadline passed); like a failure it merges nothing.
    ``gated``: answered independent by a cheaper model's gate, without the judge's own features.
    ``near``: an independent pair the judge was unsure of — the label whose probability
    ``near_probability`` fell within the review band below its threshold (the review queue's).
    ``doubtful``: a redundant or contradictory decision short of the confirmation reach above its
    threshold (``JudgeModel.doubts``), for an LLM to confirm, with the label's probability
    ``near_probability``.
    ``stage``: who decided the label; ``routed``: the pair was sent to the LLM (``RoutedJudge``);
    ``over_budget``: deferred because the run's LLM budget was spent. ``cascade``: which stage of
    the offline judge's cascade answered (None: not the offline judge); ``fast_label``: for a pair
    a later stage (middle or accurate) decided, what the fast stage alone would have said;
    ``middle_label``: for a pair the accurate stage decided behind the middle stage, what the
    middle stage alone would have said. ``restated``: the LLM's "redundant" taken on a pair the
    offline judge read as a change (``weigh``). ``carried``: for a pair left independent and sent to
    the LLM because one memory nearly says everything the other does (``RoutedJudge.near_carried``),
    the share of its words the other carries (``merging.carried_share``)."""

    label: Label
    reason: str
    failed: bool = False
    deferred: bool = False
    gated: bool = False
    near: Label | None = None
    near_probability: float | None = None
    stage: Stage = "offline"
    routed: bool = False
    over_budget: bool = False
    cascade: CascadeStage | None = None
    fast_label: Label | None = None
    doubtful: bool = False
    middle_label: Label | None = None
    restated: bool = False
    carried: float | None = None

    @property
    def routed_carried(self) -> bool:
        """Sent to the LLM for its carried share alone (``RoutedJudge.near_carried``)."""
        return self.routed and self.carried is not None

    @property
    def changed(self) -> bool:
        """A later stage of the offline cascade decided otherwise than the stage before it would
        have: the middle stage than the fast model, the accurate stage than the middle model (the
        fast one without a middle stage)."""
        before = self.fast_label if self.cascade == "middle" else self.middle_label or self.fast_label
        return self.cascade in ("middle", "accurate") and before is not None and before != self.label


@dataclass(frozen=True)
class Fusion:
    """How to resolve a group: ``text`` is the fused memory, or None for "keep the newer" (a
    contradiction) or "do not merge" (a redundant group).
    ``unsupported``: the model's fused text said things no source said and was not used.
    ``apart``: a group called redundant left unmerged, since no text carries all it says."""

    text: str | None
    reason: str
    failed: bool = False
    unsupported: bool = False
    apart: bool = False


Advance = Callable[[int], None]
"""Told how many more pairs are judged, as they are (progress)."""


@dataclass
class DeepVectors:
    """A judge's contextual text vectors that outlive a run (kept on the nodes): ``known`` are
    read back before judging, ``made`` are the ones the judge had to compute, to be stored."""

    known: dict[str, np.ndarray] = field(default_factory=dict)
    made: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: int = 0
    """Texts judged without a vector, none kept: only gated pairs read them."""
    cross_encoded: int = 0
    """Pair orders the judge's cross-encoder read."""


def _split(judged: Sequence[Judgment], requests: Sequence[JudgeRequest]) -> list[list[Judgment]]:
    """A flat list of judgments back into one list per request."""
    results, start = [], 0
    for request in requests:
        results.append(list(judged[start:start + len(request.candidates)]))
        start += len(request.candidates)
    return results


def _judge_by_newer(judge: JudgeResource, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
    """(older, newer) pairs as one request per distinct newer text with all its older ones."""
    by_newer: dict[str, list[int]] = {}
    for position, (_, newer) in enumerate(pairs):
        by_newer.setdefault(newer, []).append(position)
    requests = [JudgeRequest(MemoryRef(newer), tuple(MemoryRef(pairs[i][0]) for i in positions),
                             ("older",) * len(positions))
                for newer, positions in by_newer.items()]
    results, usage = judge.judge_requests(requests)
    judged: list[Judgment | None] = [None] * len(pairs)
    for positions, judgments in zip(by_newer.values(), results, strict=True):
        for position, judgment in zip(positions, judgments, strict=True):
            judged[position] = judgment
    return [j for j in judged if j is not None], usage


class JudgeResource(ConfigurableResource, ABC):
    """Decides how two memories of one tenant relate, and how to fuse a redundant group."""

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Identifies the judge in the judgment cache: another judge re-judges."""

    @abstractmethod
    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        """Label (older, newer) text pairs."""

    @property
    def deep_vector_space(self) -> str | None:
        """The space of the text vectors this judge computes and would reuse from earlier runs
        (``DeepVectors``); None when it computes none worth keeping."""
        return None

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        """Label each request's candidates against its new memory; by default every pair in one
        batch of ``judge_pairs``."""
        flat = [pair for request in requests for pair in request.pairs()]
        judged, usage = self.judge_pairs(flat)
        if advance:
            advance(len(flat))
        return _split(judged, requests), usage

    @abstractmethod
    def fuse(self, texts: Sequence[str], label: Label, dates: Sequence[str | None] | None = None,
             budget: CallBudget | None = None) -> tuple[Fusion, ChatUsage]:
        """Fuse redundant texts, or reconcile contradictory ones (``text=None``: irreconcilable).
        ``texts`` come oldest first, with their ``dates`` when known. ``budget``: the run's
        resolver budget (a model's calls only); once spent the group is left for the next run."""

    def run_deadline_s(self) -> float | None:
        """Seconds one run may spend judging; None: no limit."""
        return None

    @property
    def llm_budget(self) -> tuple[int, int] | None:
        """LLM calls and tokens one run's judging may spend (0: no limit); None: no LLM."""
        return None


def budgeted_fuse(judge: JudgeResource) -> tuple[Callable[..., tuple[Fusion, ChatUsage]], CallBudget | None]:
    """``judge.fuse`` under a fresh per-run resolver budget (the judge's LLM limits, counted apart
    from judging), and that budget; None without a model."""
    budget = CallBudget(*judge.llm_budget) if judge.llm_budget is not None else None
    return partial(judge.fuse, budget=budget), budget


REQUESTS_PER_BATCH = 200


class OfflineJudge(JudgeResource):
    """A shipped pair model (mem_assets/dedup/offline_judge_model.py: ``accurate`` or ``fast``), precision
    first; fuses by keeping the more informative text (``merging.informativeness``). ``gate``: the
    model's cascade is used (``GATES``, ``CASCADES``, ``MIDDLES``: the middle model reads only the
    pairs the fast model is not sure of, the accurate model only those neither is sure of)."""

    model: ModelKind = "accurate"
    gate: bool = True
    middle: bool = False
    """With ``gate``: the cascade's middle stage (``MIDDLES``) runs (``MEMTEND_JUDGE_MIDDLE``). Off by
    default: on hand-written held-out pairs it cost 0.008 of contradictory F1 for ~19 % of the
    judging time (docs/dedup.md)."""
    models_dir: str = str(DEFAULT_MODELS_DIR)
    """Folder of the bge-small jars the accurate model reads (``MEMTEND_MODELS_DIR``)."""
    review_band: float = Field(default=DEFAULT_REVIEW_BAND, ge=0.0, le=1.0)
    """Pairs left independent whose P(redundant) or P(contradictory) is at least its threshold
    minus this are queued for review (``MEMTEND_REVIEW_BAND``); labels do not change. Not part
    of the fingerprint: a new band applies to pairs judged from then on."""
    near_merges: float | None = Field(default=None, ge=0.0, le=1.0)
    """With an LLM routing the uncertain: the band below the redundant threshold in place of
    ``review_band`` (``MEMTEND_LLM_NEAR_MERGES``)."""
    near_supersedes: float | None = Field(default=None, ge=0.0, le=1.0)
    """The same below the contradictory threshold (``MEMTEND_LLM_NEAR_SUPERSEDES``)."""
    confirm_merges: float = Field(default=DEFAULT_CONFIRM_MERGES, ge=0.0, le=1.0)
    """Redundant decisions with P under t + this × (1 − t) (a share of the room above the
    threshold t; 1: every one) are marked ``doubtful``: with an LLM configured they go to it for
    confirmation (``MEMTEND_LLM_CONFIRM_MERGES``). Not part of the fingerprint either."""
    confirm_supersedes: float = Field(default=DEFAULT_CONFIRM_SUPERSEDES, ge=0.0, le=1.0)
    """The same for contradictory decisions (``MEMTEND_LLM_CONFIRM_SUPERSEDES``)."""

    def bands(self) -> dict[str, float]:
        """The band below each label's threshold within which an independent pair is ``near``."""
        return {"redundant": self.review_band if self.near_merges is None else self.near_merges,
                "contradictory": self.review_band if self.near_supersedes is None else self.near_supersedes}

    def _gate(self) -> Gate | None:
        from mem_assets.dedup import offline_judge_model as judge_model

        return judge_model.gate(self.model, cascade=True) if self.gate else None

    def _middle(self) -> Gate | None:
        from mem_assets.dedup import offline_judge_model as judge_model

        return judge_model.middle_gate(self.model) if self.gate and self.middle else None

    @property
    def fingerprint(self) -> str:
        from mem_assets.dedup import offline_judge_model as judge_model

        model, gate, middle = judge_model.load(self.model), self._gate(), self._middle()
        encoders = "".join(f"+{jar.fingerprint}" for jar in bge.JARS.values()) if model.aligned else ""
        return (f"offline-model:{model.fingerprint}{encoders}+{judge_model.OVERRULES}"
                + (f"+{gate.fingerprint}" if gate else "") + (f"+middle:{middle.fingerprint}" if middle else ""))

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        [judgments], usage = self._judge_batches([list(pairs)])
        return judgments, usage

    @property
    def deep_vector_space(self) -> str | None:
        from mem_assets.dedup import offline_judge_model as judge_model

        return E5_PASSAGE_SPACE if judge_model.load(self.model).deep else None

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        """In batches of ``REQUESTS_PER_BATCH`` new memories, so progress moves while a long run
        judges (the accurate model embeds ~60 texts a second); one featurizer for all batches,
        so a text shared by several batches is embedded once, and a text in ``vectors.known``
        not at all."""
        batches = [requests[i:i + REQUESTS_PER_BATCH] for i in range(0, len(requests), REQUESTS_PER_BATCH)]
        flat, usage = self._judge_batches([[p for r in batch for p in r.pairs()] for batch in batches], advance,
                                          vectors)
        return [judgments for batch, judged in zip(batches, flat, strict=True)
                for judgments in _split(judged, batch)], usage

    def _judge_batches(self, batches: Sequence[Sequence[tuple[str, str]]], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        from mem_assets.dedup import offline_judge_model as judge_model

        model, gate, middle = judge_model.load(self.model), self._gate(), self._middle()
        shared = judge_model.featurizer(model.deep, vectors.known if vectors else None, model.aligned,
                                        Path(self.models_dir), tuple(model.cross_encoders))
        results = []
        for pairs in batches:
            decided = judge_model.predict(pairs, model, shared, gate, self.bands(),
                                          {"redundant": self.confirm_merges,
                                           "contradictory": self.confirm_supersedes}, middle)
            results.append([Judgment(d.label, d.reason, gated=d.gated is not None, near=d.near,
                                     near_probability=d.probability if d.doubtful else d.near_probability,
                                     doubtful=d.doubtful, cascade=d.stage, fast_label=d.fast_label,
                                     middle_label=d.middle_label)
                            for d in decided])
            if advance:
                advance(len(pairs))
        if vectors is not None:
            vectors.made.update(shared.embedded_deep)
            vectors.skipped = shared.deep_skipped
            vectors.cross_encoded = shared.cross_encoded
        return results, ChatUsage(calls=sum(len(pairs) for pairs in batches))

    def fuse(self, texts: Sequence[str], label: Label, dates: Sequence[str | None] | None = None,
             budget: CallBudget | None = None) -> tuple[Fusion, ChatUsage]:
        if label == "contradictory":
            return Fusion(None, "offline judge never reconciles a contradiction"), ChatUsage()
        best = max(texts, key=informativeness)
        return Fusion(best, "kept the most informative text"), ChatUsage()


class OpenAIJudge(JudgeResource):
    """An OpenAI-compatible chat model: each new memory with all its candidates, up to
    ``memories_per_call`` new memories a call (never more candidates than ``chat.max_tokens``
    can answer, ``TOKENS_PER_VERDICT`` each): the system prompt is paid once per call.

    Timeouts and backoff retries come from ``chat``; an unreadable answer is asked for once more;
    after ``deadline_s``, or once the run's budget (``max_calls_per_run``, ``max_tokens_per_run``)
    is spent, no new call starts and the remaining memories wait for the next run.
    """

    chat: OpenAIChatResource
    max_concurrency: int = 4
    memories_per_call: int = Field(default=DEFAULT_JUDGE_MEMORIES_PER_CALL, ge=1,
                                   description="New memories (each with its candidates) one call judges.")
    deadline_s: float = Field(default=900.0, gt=0, description="Seconds of judging per run.")
    offline_veto: bool = True
    """The model's "redundant" or "contradictory" is not applied to a pair the offline gate model
    (``offline_judge_model.gate``, static word vectors, no e5) calls clearly independent: the
    model's word alone does not merge or supersede what the offline evidence says is unrelated."""
    max_calls_per_run: int = Field(default=0, ge=0, description="LLM calls one run's judging may make; 0: no limit.")
    max_tokens_per_run: int = Field(default=0, ge=0,
                                    description="Prompt + completion tokens one run's judging may spend; 0: no limit.")

    def _gate(self) -> Gate | None:
        from mem_assets.dedup import offline_judge_model as judge_model

        return judge_model.gate() if self.offline_veto else None

    @property
    def fingerprint(self) -> str:
        gate = self._gate()
        return f"openai:{self.chat.model}:v2" + (f"+veto:{gate.fingerprint}" if gate else "")

    def run_deadline_s(self) -> float | None:
        return self.deadline_s

    @property
    def llm_budget(self) -> tuple[int, int] | None:
        return self.max_calls_per_run, self.max_tokens_per_run

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        client = self.chat.client()
        deadline = time.monotonic() + self.deadline_s
        budget = CallBudget(self.max_calls_per_run, self.max_tokens_per_run)

        def one(batch: Sequence[JudgeRequest]) -> tuple[list[Judgment], ChatUsage]:
            count = sum(len(request.candidates) for request in batch)
            if time.monotonic() >= deadline:
                return [Judgment("independent", "not judged: the run's deadline passed", deferred=True,
                                 stage="llm")] * count, ChatUsage(deferred=len(batch))
            verdict, usage = self.chat.ask_json(JUDGE_SYSTEM, judge_message(batch), GroupVerdict,
                                                client=client, context={"candidates": count, "groups": [
                                                    len(request.candidates) for request in batch]},
                                                deadline=deadline, sent_schema=verdict_schema(count), budget=budget)
            if usage.deferred:
                return [Judgment("independent", "not judged: the run's LLM budget is spent", deferred=True,
                                 stage="llm", over_budget=True)] * count, ChatUsage()
            if verdict is None:
                kinds = ", ".join(sorted(usage.failure_kinds)) or "no valid answer"
                log.warning("Judge failed on %.60r and %d more new memories, %d candidates (%s): counted as "
                            "independent, nothing merged", batch[0].new.text, len(batch) - 1, count, kinds)
                return [Judgment("independent", f"judge failed: {kinds}", failed=True,
                                 stage="llm")] * count, usage
            return [Judgment(v.relation, v.reason or "(no reason given)", stage="llm")
                    for v in verdict.labels()], usage

        def counted(batch: Sequence[JudgeRequest]) -> tuple[list[Judgment], ChatUsage]:
            judged, usage = one(batch)
            if advance:
                advance(len(judged))
            return judged, usage

        batches = [[requests[i] for i in indices] for indices in
                   call_batches(requests, self.memories_per_call, self.chat.max_tokens // TOKENS_PER_VERDICT)]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            results = list(pool.map(counted, batches))
        usage = ChatUsage()
        for _, call_usage in results:
            usage.add(call_usage)
        judged = _split([j for judgments, _ in results for j in judgments], requests)
        return self._vetoed(requests, judged), usage

    def _vetoed(self, requests: Sequence[JudgeRequest], judged: list[list[Judgment]]) -> list[list[Judgment]]:
        """``judged`` with each redundant or contradictory verdict on a pair the offline gate calls
        clearly independent turned independent (``gated``, the model's word kept in the reason)."""
        gate = self._gate()
        spots = [(r, c) for r, judgments in enumerate(judged) for c, j in enumerate(judgments)
                 if j.label != "independent" and not j.failed]
        if gate is None or not spots:
            return judged
        from mem_assets.dedup import offline_judge_model as judge_model

        pairs = [requests[r].pairs()[c] for r, c in spots]
        cheap = judge_model.featurizer(False).cheap([*pairs, *((b, a) for a, b in pairs)])
        probabilities = gate.model.pair_probabilities(cheap[:len(pairs)], cheap[len(pairs):])
        out = [list(judgments) for judgments in judged]
        for (r, c), row, closed in zip(spots, probabilities, gate.closed(probabilities), strict=True):
            if closed:
                said = out[r][c]
                out[r][c] = Judgment("independent", f"the model said {said.label} ({said.reason}), "
                                                    f"overruled: {gate.reason(row)}", gated=True, stage="offline")
        return out

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        """(older, newer) pairs, one call per distinct newer text with all its older ones."""
        return _judge_by_newer(self, pairs)

    def fuse(self, texts: Sequence[str], label: Label, dates: Sequence[str | None] | None = None,
             budget: CallBudget | None = None) -> tuple[Fusion, ChatUsage]:
        """A fused text is used only if every content word of it appears in some source and, for
        a redundant group, it carries every source's content (``merging.carries``). Otherwise the
        group keeps a source that carries all the others, or is not merged at all: the model's
        word alone never archives a memory whose content the kept text lacks (a text in the
        group may be written to make it say "redundant")."""
        answer, usage = self.chat.ask_json(FUSE_SYSTEM, fuse_message(texts, dates, label), Reconciliation,
                                           budget=budget)
        if usage.deferred:
            return Fusion(None, "over the run's LLM budget: left for the next run", failed=True), usage
        if answer is None:
            log.warning("Resolver gave no valid answer for %d memories: left unresolved", len(texts))
            return Fusion(None, "resolver failed: no valid answer", failed=True), usage
        merged = (answer.merged or "").strip()
        missing = unsupported_words(merged, texts) if answer.reconcilable and merged else []
        if missing:
            log.warning("Fused text %.80r says what no source says (%s): not used", merged,
                        ", ".join(missing[:5]))
        if label == "contradictory":
            if answer.reconcilable and merged and not missing:
                return Fusion(merged, answer.reason), usage
            if missing:
                return Fusion(None, "reconciled text not supported by its sources: the newest "
                                    "stays", unsupported=True), usage
            return Fusion(None, answer.reason), usage
        if answer.reconcilable and merged and not missing and carries(merged, texts):
            return Fusion(merged, answer.reason), usage
        why = ("fused text not supported by its sources" if missing
               else "fused text leaves out what a source says" if answer.reconcilable and merged
               else answer.reason)
        kept = carrying_source(texts)
        if kept is not None:
            return Fusion(kept, f"kept the source that carries all the others ({why})",
                          unsupported=bool(missing)), usage
        log.warning("No text carries what all %d 'redundant' memories say: kept apart", len(texts))
        return Fusion(None, f"not merged: no text carries every source's content ({why})",
                      unsupported=bool(missing), apart=True), usage


def _restated(offline: Judgment, restatements: Restatements, continues: bool) -> bool:
    """Whether the LLM's "redundant" stands on a pair the offline judge read as a change: left
    independent near "contradictory" (any policy but none), or decided contradictory (``decided``;
    ``continued`` when the newer memory says the fact goes on)."""
    if offline.doubtful:
        return restatements == "decided" or (restatements == "continued" and continues)
    return restatements != "none"


def weigh(offline: Judgment, answer: Judgment, restatements: Restatements = DEFAULT_RESTATEMENTS,
          continues: bool = False) -> Judgment:
    """The label of a pair the offline judge was unsure of, given the LLM's ``answer``.

    Left independent near a threshold (``offline.near``): the LLM may settle it as independent
    or confirm the label the offline judge nearly gave; another label (a contradiction where the
    offline evidence was for a repeat; a repeat where it was for a change, but see below) is not
    applied: the pair stays apart and queued for review. Decided short of the confirmation reach above its threshold
    (``offline.doubtful``): the LLM may confirm the decision or settle the pair independent; any
    other answer leaves it apart too — two judges disagreeing merge nothing — except a restatement
    (``_restated``): a pair the offline judge read as a change of value that the LLM calls
    "redundant" is merged where ``restatements`` allows it. A merge keeps every source's content
    (``merging.carries``); the opposite, a repeat turned into a supersede, is never taken. An
    answer that never came (failure, deadline, budget) leaves the pair apart (independent, not
    cached) for the next run."""
    said = offline.near or ("redundant" if offline.carried is not None else offline.label)
    doubt = (f"left independent offline, one memory carrying {offline.carried:.0%} of the other's words"
             if offline.carried is not None and offline.near is None else
             f"offline P({said}) = {offline.near_probability:.2f}, in the uncertain band "
             f"{'above' if offline.doubtful else 'below'} its threshold")
    if answer.failed or answer.deferred:
        return replace(offline, label="independent", routed=True, failed=answer.failed, deferred=answer.deferred,
                       over_budget=answer.over_budget,
                       reason=f"{offline.reason}; LLM did not decide ({answer.reason}): left apart")
    if answer.label in ("independent", said):
        return Judgment(answer.label, f"LLM: {answer.reason} ({doubt})", stage="llm", routed=True,
                        doubtful=offline.doubtful, carried=offline.carried)
    if answer.label == "redundant" and said == "contradictory" and _restated(offline, restatements, continues):
        return Judgment("redundant", f"LLM: {answer.reason} ({doubt}; read offline as a change, by the LLM as "
                                     "the same fact restated)", stage="llm", routed=True, doubtful=offline.doubtful,
                        restated=True)
    if offline.doubtful:
        return Judgment("independent", f"{offline.reason}; LLM said {answer.label} ({doubt}): the two "
                                       "judges disagree, left apart", stage="llm", routed=True, doubtful=True)
    return replace(offline, routed=True,
                   reason=f"{offline.reason}; LLM said {answer.label}, which the offline evidence does not "
                          f"support ({doubt}): left apart")


class RoutedJudge(JudgeResource):
    """The offline judge decides every pair; only the pairs it is unsure of — left independent
    within the band below a threshold (``Judgment.near``, ``MEMTEND_REVIEW_BAND``) or decided
    short of the confirmation reach above it (``Judgment.doubtful``, ``MEMTEND_LLM_CONFIRM_*``) — go
    to the LLM, each new memory with just those candidates (``OpenAIJudge`` batches them), and its
    answer is ``weigh``ed against the offline evidence. ``near_carried`` (> 0) also sends a pair left
    independent whose one memory has at least this share of its words carried by the other (a
    repeat with a detail more, which the offline judge scores as different facts), unless both are
    events on different dates; for it the LLM may confirm a repeat or leave it apart. Clear pairs
    never reach the LLM; so a rerun, whose pairs are all cached, makes no call. Fusing is the LLM's
    (as ``OpenAIJudge``)."""

    offline: OfflineJudge
    llm: OpenAIJudge
    restatements: Restatements = DEFAULT_RESTATEMENTS
    near_carried: float = DEFAULT_NEAR_CARRIED

    @property
    def fingerprint(self) -> str:
        taken = "" if self.restatements == "none" else f"+restatements:{self.restatements}"
        carried = f"+carried:{self.near_carried:g}" if self.near_carried else ""
        return f"routed:{self.offline.fingerprint}|{self.llm.fingerprint}{taken}{carried}"

    @property
    def deep_vector_space(self) -> str | None:
        return self.offline.deep_vector_space

    def run_deadline_s(self) -> float | None:
        return self.llm.run_deadline_s()

    @property
    def llm_budget(self) -> tuple[int, int] | None:
        return self.llm.llm_budget

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        return _judge_by_newer(self, pairs)

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        """The LLM's usage only: the offline judge's work costs no call."""
        offline, _ = self.offline.judge_requests(requests, advance, vectors)
        if self.near_carried:
            offline = [[self._carried(judgment, pair) for judgment, pair in zip(judgments, request.pairs(), strict=True)]
                       for request, judgments in zip(requests, offline, strict=True)]
        unsure = [[k for k, judgment in enumerate(judgments)
                   if judgment.near is not None or judgment.doubtful or judgment.carried is not None]
                  for judgments in offline]
        asks = [JudgeRequest(request.new, tuple(request.candidates[k] for k in ks), tuple(request.when[k] for k in ks))
                for request, ks in zip(requests, unsure, strict=True) if ks]
        answers, usage = self.llm.judge_requests(asks) if asks else ([], ChatUsage())
        answered = iter(answers)
        results = []
        for request, judgments, ks in zip(requests, offline, unsure, strict=True):
            weighed = list(judgments)
            if ks:
                pairs = request.pairs()
                for k, answer in zip(ks, next(answered), strict=True):
                    weighed[k] = weigh(judgments[k], answer, self.restatements, says_it_continues(pairs[k][1]))
            results.append(weighed)
        return results, usage

    def _carried(self, judgment: Judgment, pair: tuple[str, str]) -> Judgment:
        from mem_assets.dedup.offline_judge_features import dated_events

        if judgment.label != "independent" or judgment.near is not None:
            return judgment
        share = carried_share(*pair)
        if share < self.near_carried or dated_events(*pair):
            return judgment
        return replace(judgment, carried=round(share, 4))

    def fuse(self, texts: Sequence[str], label: Label, dates: Sequence[str | None] | None = None,
             budget: CallBudget | None = None) -> tuple[Fusion, ChatUsage]:
        return self.llm.fuse(texts, label, dates, budget)
