"""Per-tenant context profiles (user/agent/character ids, single-valued predicates)."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from mem_assets.context_graph.records import ContextConfig


class ContextProfiles(ConfigurableResource):
    """The JSON config file of ``MEMTEND_CONTEXT_CONFIG``; empty: records carry their own ids."""

    config_file: str = ""

    def load(self, override: str = "") -> ContextConfig:
        path = override or self.config_file
        if not path:
            return ContextConfig()
        return ContextConfig.model_validate_json(Path(path).read_text(encoding="utf-8"))
