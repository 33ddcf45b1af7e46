"""The floor plan holds: imports flow entry points → domains → shared, and only the settings
object reads the environment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ("ingest", "dedup", "reorg", "context_graph", "lifecycle")
#: The one domain-to-domain dependency: seed 002's context records are a second kind of inbox
#: file, so the context graph reads the inbox, its ledger and its node builder through ingest.
DOMAIN_DEPENDENCIES = {"context_graph": {"ingest"}}
ENTRY_POINTS = {"mem_assets/definitions.py", "mem_assets/cli.py", "mem_assets/resources.py",
                "mem_assets/tending.py", "mem_assets/planning.py"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_shared_package_never_imports_a_domain():
    offenders = [(str(p.relative_to(ROOT)), name) for p in _modules("mem_resources")
                 for name in _imports(p) if name.startswith("mem_assets")]
    assert offenders == []


def test_domains_import_only_themselves_and_the_shared_package():
    offenders = []
    for domain in DOMAINS:
        for path in sorted((ROOT / "mem_assets" / domain).rglob("*.py")):
            for name in _imports(path):
                parts = name.split(".")
                allowed = {domain, *DOMAIN_DEPENDENCIES.get(domain, ())}
                if parts[0] == "mem_assets" and (len(parts) < 2 or parts[1] not in allowed):
                    offenders.append((str(path.relative_to(ROOT)), name))
    assert offenders == []


def test_the_product_never_imports_research_or_benchmarks():
    """Studies, training and labeled data live in research/; a deployment runs without them."""
    offenders = [(str(p.relative_to(ROOT)), name) for package in ("mem_assets", "mem_resources")
                 for p in _modules(package) for name in _imports(p)
                 if name.split(".")[0] in {"research", "bench", "tests"}]
    assert offenders == []
    assert (ROOT / "research" / "training").is_dir()


def test_every_module_of_mem_assets_is_a_domain_or_an_entry_point():
    top = {str(p.relative_to(ROOT)) for p in (ROOT / "mem_assets").glob("*.py")} - {"mem_assets/__init__.py"}
    assert top == ENTRY_POINTS
    assert {p.name for p in (ROOT / "mem_assets").iterdir() if p.is_dir() and p.name != "__pycache__"} \
        == set(DOMAINS)


#: Any use of the environment except setting a variable for a native library loaded later
#: (``os.environ["OMP_NUM_THREADS"] = …`` in a worker process).
_ENV_READ = re.compile(r"os\.getenv|envvar=|os\.environ(?!\[[^\]]+\]\s*=[^=])")


def test_only_settings_reads_the_environment():
    readers = []
    for package in ("mem_assets", "mem_resources"):
        for path in _modules(package):
            if _ENV_READ.search(path.read_text(encoding="utf-8")) and path.name != "settings.py":
                readers.append(str(path.relative_to(ROOT)))
    assert readers == []
    assert _ENV_READ.search('cmd_env = {**os.environ, "A": "1"}')
    assert _ENV_READ.search('os.environ["A"] == "1"')
    assert not _ENV_READ.search('os.environ["OMP_NUM_THREADS"] = str(threads)')


def test_every_query_module_runs_in_managed_transactions():
    """Query functions take a ManagedTransaction (``tx.run``), so callers use execute_read /
    execute_write and the driver retries transient errors; no auto-commit ``session.run``."""
    modules = [*(ROOT / "mem_assets").glob("*/queries.py"), ROOT / "mem_resources" / "memory_queries.py"]
    offenders = [str(path.relative_to(ROOT)) for path in modules
                 if "session.run(" in path.read_text(encoding="utf-8")]
    assert len(modules) == 6
    assert offenders == []
