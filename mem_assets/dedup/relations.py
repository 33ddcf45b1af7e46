"""The three relations a judge can find between two memories of one tenant."""

import re
from typing import Literal, get_args

Label = Literal["redundant", "contradictory", "independent"]
LABELS: tuple[str, ...] = get_args(Label)

Stage = Literal["offline", "llm"]
"""Which judge decided a pair: the offline model, or the LLM (all pairs, or those routed to it)."""

CascadeStage = Literal["exact", "fast", "accurate"]
"""Which stage of the offline judge's cascade answered a pair: equal texts, the fast model sure of
it, or the accurate model (``offline_judge_model.predict``)."""

ModelKind = Literal["accurate", "fast"]
"""Which shipped offline judge model decides (mem_assets/dedup/offline_judge_model.py)."""

#: What models answer instead of the three labels (case and punctuation ignored).
SYNONYMS = {
    "redundant": ("redundant", "redundancy", "duplicate", "duplicates", "duplicated", "same",
                  "identical", "equivalent", "repeat", "repeated", "paraphrase"),
    "contradictory": ("contradictory", "contradiction", "contradicts", "contradicting",
                      "conflict", "conflicting", "conflicts", "inconsistent", "incompatible"),
    "independent": ("independent", "unrelated", "different", "distinct", "none", "no relation",
                    "compatible", "neutral"),
}
_BY_WORD = {word: label for label, words in SYNONYMS.items() for word in words}


def normalize_label(value: object) -> str | None:
    """The label a model meant ("Contradiction", " DUPLICATE.", "no_relation"), else None."""
    if not isinstance(value, str):
        return None
    word = re.sub(r"[\s_\-]+", " ", value.strip().strip("\"'`.!").lower())
    return _BY_WORD.get(word)
