"""A synthetic inbox with planted repeats and conflicts, for fault and concurrency runs.

Everyday memories built from independent slots (who, what, when), one in ten repeated later as a
case or punctuation variant (a duplicate for dedup), one in twenty contradicted later (a friend
who moved city). Deterministic for a seed, so two tenants or two runs can be compared.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

WHO = ["The user", "The user's sister", "The user's neighbour", "The user's manager", "The user's son",
       "The user's cousin", "The user's partner"]
DOES = ["likes", "often visits", "wants to learn", "talked about", "bought", "is reading about",
        "plans a trip to", "recommended", "complained about", "took photos of", "teaches", "collects"]
WHAT = ["jazz", "Kyoto", "sourdough bread", "mountain biking", "the piano", "old cameras", "Lisbon",
        "board games", "rock climbing", "green tea", "Italian cooking", "chess openings", "the Alps",
        "vinyl records", "bird watching", "sushi", "marathon training", "gardening", "watercolor painting",
        "Norway", "stand-up comedy", "yoga", "the Louvre", "pottery", "sailing", "origami", "opera",
        "street food", "astronomy", "calligraphy"]
WHEN = ["on weekends", "last spring", "every morning", "after work", "in 2023", "with friends",
        "during the holidays", "twice a month", "since college", "at night", "on Fridays"]
CITIES = ["Berlin", "Paris", "Madrid", "Oslo", "Tokyo", "Toronto", "Sydney", "Vienna", "Lima", "Cairo"]
SYLLABLES = ["ka", "lo", "mi", "ren", "sa", "to", "vi", "zu", "an", "el", "mor", "quin"]
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def _friend(i: int) -> str:
    return "".join(SYLLABLES[(i // 12 ** k) % 12] for k in range(3)).capitalize()


def planted_items(n: int, seed: int = 13) -> list[dict]:
    """``n`` inbox items in time order (one minute apart)."""
    rng = random.Random(seed)
    texts: list[str] = []
    seen: set[str] = set()
    friends = 0
    while len(texts) < n:
        roll = rng.random()
        if roll < 0.10 and texts:
            original = rng.choice(texts)
            text = original.lower().rstrip(".") if rng.random() < 0.5 else original.rstrip(".") + "!"
        elif roll < 0.15 and friends:
            friend = rng.randrange(friends)
            text = f"My friend {_friend(friend)} now lives in {rng.choice(CITIES)}."
        elif roll < 0.25:
            text = f"My friend {_friend(friends)} lives in {rng.choice(CITIES)}."
            friends += 1
        else:
            first, second = rng.sample(WHAT, 2)
            text = f"{rng.choice(WHO)} {rng.choice(DOES)} {first} and {second} {rng.choice(WHEN)}."
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return [{"memory": text, "created_at": (T0 + timedelta(minutes=i)).isoformat(),
             "tags": ["planted"]} for i, text in enumerate(texts)]


def write_planted_inbox(folder: Path, n: int, seed: int = 13, files: int = 2) -> list[Path]:
    """The items split over ``files`` JSONL files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    items = planted_items(n, seed)
    size = -(-len(items) // files)
    paths = []
    for number in range(files):
        path = folder / f"planted-{number:02d}.jsonl"
        path.write_text("".join(json.dumps(item) + "\n" for item in items[number * size:(number + 1) * size]),
                        encoding="utf-8")
        paths.append(path)
    return paths
