"""The local instance's storage (dagster_home/dagster.yaml): Dagster's SQLite files in
$DAGSTER_HOME, written through kept connections and run databases copied from an empty one, read
back the same by Dagster's own storage (the UI, the daemon, a process of another version)."""

import shutil
import sqlite3
from pathlib import Path

import dagster as dg
import pytest
import yaml

from mem_resources.sqlite_storage import KeptConnectionsEventLogStorage

ROOT = Path(__file__).resolve().parents[1]


@dg.asset(check_specs=[dg.AssetCheckSpec("has_rows", asset="numbers")])
def numbers(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    context.log.info("counted")
    return dg.MaterializeResult(metadata={"rows": 3}, check_results=[dg.AssetCheckResult(passed=True)])


def _home(tmp_path: Path) -> Path:
    """A $DAGSTER_HOME with the repo's instance config."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def _events(instance: dg.DagsterInstance, run_id: str) -> list[tuple[str, str]]:
    return [(e.dagster_event.event_type_value if e.is_dagster_event else "LOG", e.step_key or "")
            for e in instance.all_logs(run_id)]


def test_runs_written_through_kept_connections_read_back_the_same_with_dagsters_own_storage(tmp_path, monkeypatch):
    home = _home(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.event_log_storage, KeptConnectionsEventLogStorage)
        runs = [dg.materialize([numbers], instance=instance).run_id for _ in range(3)]
        written = {run_id: _events(instance, run_id) for run_id in runs}
        latest = instance.get_latest_materialization_event(dg.AssetKey("numbers"))
    assert latest is not None and latest.run_id == runs[-1]
    assert all(("ASSET_CHECK_EVALUATION", "numbers") in events and ("LOG", "numbers") in events
               for events in written.values())

    # The same files under Dagster's default storage (no ``storage`` section).
    stock = tmp_path / "stock"
    shutil.copytree(home, stock)
    config = yaml.safe_load((stock / "dagster.yaml").read_text())
    del config["storage"]
    (stock / "dagster.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("DAGSTER_HOME", str(stock))
    with dg.DagsterInstance.from_config(str(stock)) as reader:
        assert type(reader.event_log_storage).__name__ == "SqliteEventLogStorage"
        assert {run_id: _events(reader, run_id) for run_id in runs} == written
        assert reader.get_latest_materialization_event(dg.AssetKey("numbers")).run_id == runs[-1]
        more = dg.materialize([numbers], instance=reader).run_id  # and it writes on after them
        assert ("ASSET_MATERIALIZATION", "numbers") in _events(reader, more)

    for run_id in runs:  # each run's database is whole, with Dagster's schema and migration stamp
        with sqlite3.connect(stock / "history" / "runs" / f"{run_id}.db") as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert db.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)


def test_synchronous_is_checked_against_the_two_modes(tmp_path, monkeypatch):
    home = _home(tmp_path)
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    config["storage"]["custom"]["config"]["synchronous"] = "OFF"
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with pytest.raises(dg.DagsterInvalidConfigError):
        dg.DagsterInstance.from_config(str(home))
