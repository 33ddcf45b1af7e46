"""The three relations a judge can find between two memories of one tenant."""

import re
from typing import Literal, get_args

Label = Literal["redundant", "contradictory", "independent"]
LABELS: tuple[str, ...] = get_args(Label)

Stage = Literal["offline", "llm"]
"""Which judge decided a pair: the offline model, or the LLM (all pairs, or those routed to it)."""

CascadeStage = Literal["exact", "fast", "middle", "accurate"]
"""Which stage of the offline judge's cascade answered a pair: equal texts, the fast model sure of
it, the middle model (e5, no bge or cross-encoder) sure of it, or the accurate model
(``offline_judge_model.predict``)."""

ModelKind = Literal["accurate", "middle", "fast"]
"""A shipped offline judge model (mem_assets/dedup/offline_judge_model.py); ``middle`` is a stage
of the accurate judge's cascade, not a judge of its own."""

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
