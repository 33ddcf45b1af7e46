"""Text as it arrives from outside, made safe to store: invisible characters removed before any
emptiness check, so a memory can never be activated with nothing a reader could see.

Removed: control characters except tab and newline (``\\r\\n`` and ``\\r`` become ``\\n``), lone
surrogates, and format characters (zero-width spaces, BOMs, bidi overrides, tag characters).
Zero-width (non-)joiners are kept between two visible characters, where they shape emoji and
Indic or Persian script; anywhere else they are removed too.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from itertools import chain

from pydantic import AfterValidator, BeforeValidator

BOM = "\ufeff"
_JOINERS = frozenset("\u200c\u200d")
_KEPT_CONTROLS = frozenset("\t\n")
_REMOVED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})
#: Letters and symbols that render as blank space, the usual way to fake an empty name.
_BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Mn", "Me", "Zs", "Zl", "Zp"})


def _removed(char: str) -> bool:
    return char not in _KEPT_CONTROLS and unicodedata.category(char) in _REMOVED_CATEGORIES


@cache
def _removable() -> re.Pattern[str]:
    """One character class of every removed character (format characters only occur in planes
    0, 1 and 14), built once from this Python's Unicode database."""
    code_points = [cp for cp in chain(range(0x20000), range(0xE0000, 0xE1000)) if _removed(chr(cp))]
    ranges: list[list[int]] = []
    for cp in code_points:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


def _keep_shaping_joiner(match: re.Match[str]) -> str:
    text, index = match.string, match.start()
    char = text[index]
    if char in _JOINERS and 0 < index < len(text) - 1 and is_visible(text[index - 1]) \
            and is_visible(text[index + 1]):
        return char
    return ""


def clean_text(text: str) -> str:
    """``text`` without invisible control and format characters (see the module docstring)."""
    return _removable().sub(_keep_shaping_joiner, text.replace("\r\n", "\n").replace("\r", "\n"))


def is_visible(char: str) -> bool:
    return not char.isspace() and char not in _BLANK_GLYPHS \
        and unicodedata.category(char) not in _INVISIBLE_CATEGORIES


def require_visible(text: str) -> str:
    if text and not any(is_visible(char) for char in text):
        raise ValueError("text has no visible characters")
    return text


def _clean_if_text(value: object) -> object:
    return clean_text(value).strip() if isinstance(value, str) else value


#: Put after any ``StringConstraints`` in ``Annotated[str, …]``: it still runs before them (it
#: wraps the constrained ``str``), so length and emptiness are checked on the cleaned text.
Cleaned = BeforeValidator(_clean_if_text)
#: Put last: refuses text made only of blanks, combining marks or fill characters.
Visible = AfterValidator(require_visible)


def has_lone_surrogate(value: object) -> bool:
    """True when a decoded JSON value holds a string that UTF-8 cannot encode (``"\\ud800"``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
