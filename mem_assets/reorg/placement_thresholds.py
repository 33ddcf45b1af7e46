"""Placement thresholds per topic space: shipped beside the models they were tuned with
(``models/placement-thresholds.json``, described in ``models/README.md``), overridable per
deployment by a file of the same shape (``MEMTEND_TOPIC_THRESHOLDS``), never per run.

One structure per space a language's topics can live in (``topic_vectors``): ``embedder`` (the
configured embedder's own vectors; tuned for WordLlama), ``e5`` (multilingual-e5-small) and
``combined`` (a topic encoder with e5 carried; both encoders share it), plus ``cross_language``
(offers to the other language's topics in the shared e5 space) and ``cascade`` (which memories the
embedder's space places without a model pass, ``cascade``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mem_assets.reorg.cascade import CascadeParams
from mem_assets.reorg.placement import CrossParams, PlacementParams

SHIPPED_FILE = Path(__file__).parent / "models" / "placement-thresholds.json"


def _cosine() -> float | None:
    return Field(default=None, ge=-1, le=1)


class SpaceThresholds(BaseModel):
    """Thresholds of one topic space (``PlacementParams``' fields; any left out keep the base's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    place_similarity: float | None = _cosine()
    place_margin: float | None = Field(default=None, ge=0)
    group_similarity: float | None = _cosine()
    merge_similarity: float | None = _cosine()
    attach_similarity: float | None = _cosine()
    attach_margin: float | None = Field(default=None, ge=0)
    max_members: int | None = Field(default=None, ge=2)
    min_cluster_size: int | None = Field(default=None, ge=2)
    theme_similarity: float | None = _cosine()
    min_theme_size: int | None = Field(default=None, ge=1)
    refresh_fraction: float | None = Field(default=None, gt=0, le=1)

    def over(self, base: PlacementParams) -> PlacementParams:
        params = replace(base, **self.model_dump(exclude_none=True))
        if params.min_cluster_size > params.max_members:
            raise ValueError(f"min_cluster_size {params.min_cluster_size} exceeds max_members {params.max_members}")
        return params


class CrossThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    place_similarity: float | None = _cosine()
    place_margin: float | None = Field(default=None, ge=0)

    def over(self, base: CrossParams) -> CrossParams:
        return replace(base, **self.model_dump(exclude_none=True))


class CascadeThresholds(BaseModel):
    """The placement cascade's band (``cascade.CascadeParams``), in the embedder's space."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    clear_similarity: float | None = Field(default=None, ge=-1, le=2)
    clear_margin: float | None = Field(default=None, ge=0)
    representatives: int | None = Field(default=None, ge=1)
    group_similarity: float | None = _cosine()
    min_group_size: int | None = Field(default=None, ge=2)

    def over(self, base: CascadeParams) -> CascadeParams:
        return replace(base, **self.model_dump(exclude_none=True))


class PlacementThresholds(BaseModel):
    """The thresholds file: the shipped one in full, a deployment's override in part."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    about: str = ""
    embedder: SpaceThresholds = SpaceThresholds()
    e5: SpaceThresholds = SpaceThresholds()
    combined: SpaceThresholds = SpaceThresholds()
    cross_language: CrossThresholds = CrossThresholds()
    cascade: CascadeThresholds = CascadeThresholds()

    @model_validator(mode="after")
    def _sizes_in_order(self) -> PlacementThresholds:
        for space in (self.embedder, self.e5, self.combined):
            space.over(PlacementParams())
        return self

    @classmethod
    def read(cls, path: str | Path) -> PlacementThresholds:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))

    def overridden_by(self, override: PlacementThresholds) -> PlacementThresholds:
        """These thresholds with every value ``override`` sets in their place."""
        merged = {name: getattr(self, name).model_copy(update=getattr(override, name).model_dump(exclude_none=True))
                  for name in ("embedder", "e5", "combined", "cross_language", "cascade")}
        return type(self).model_validate({name: value.model_dump() for name, value in merged.items()})

    def with_file(self, path: str) -> PlacementThresholds:
        """Overridden by the file at ``path``; empty: unchanged."""
        return self.overridden_by(type(self).read(path)) if path else self

    @property
    def embedder_params(self) -> PlacementParams:
        return self.embedder.over(PlacementParams())

    @property
    def e5_params(self) -> PlacementParams:
        return self.e5.over(PlacementParams())

    @property
    def combined_params(self) -> PlacementParams:
        return self.combined.over(PlacementParams())

    @property
    def cross_params(self) -> CrossParams:
        return self.cross_language.over(CrossParams())

    @property
    def cascade_params(self) -> CascadeParams:
        return self.cascade.over(CascadeParams())


SHIPPED = PlacementThresholds.read(SHIPPED_FILE)
#: The shipped thresholds of each space (research studies start from these).
EMBEDDER_PARAMS = SHIPPED.embedder_params
E5_PARAMS = SHIPPED.e5_params
COMBINED_PARAMS = SHIPPED.combined_params
CROSS_PARAMS = SHIPPED.cross_params
CASCADE_PARAMS = SHIPPED.cascade_params
