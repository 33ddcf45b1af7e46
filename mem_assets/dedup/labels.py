"""The three relations a judge can find between two memories of one tenant."""

from typing import Literal

Label = Literal["redundant", "contradictory", "independent"]
