"""The local instance's storage (``dagster_home/dagster.yaml``): Dagster's SQLite storage — runs,
schedules, and an event log of one database per run plus an index — unchanged except that the event
log keeps each database's connection open between events.

Dagster's SQLite event log opens a connection, stores one event and closes it, for every event;
closing the last connection of a WAL database checkpoints it and syncs the disk again. A tenant's
`tend_memory` run stores ~115 events (steps, materializations, check results), so on a busy
two-core machine a run spent ~3.5 s of its ~9 s on that (bench/fleet_bench.py). Kept open, a
commit skips the reopen and the checkpoint. ``synchronous``: ``FULL`` (Dagster's default) syncs
the disk at every commit; ``NORMAL`` (the local instance's choice) only at checkpoints — in WAL
mode still safe from corruption and from a crash of any process; only an operating-system crash
or power loss can undo the last events (a run then shows as unfinished and the run monitor fails
it; its tenant's next run redoes nothing it finished, the graph being in Neo4j). The deployment's
PostgreSQL storage (deploy/dagster.yaml) pools its connections already.
"""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Self

from dagster import Enum, EnumValue, Field, StringSource
from dagster._config import UserConfigSchema
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory
from dagster._serdes import ConfigurableClassData
from sqlalchemy import Connection, Engine, NullPool, create_engine, event

Synchronous = Literal["FULL", "NORMAL"]

#: Databases whose connection stays open: the index and the latest runs' (a run writes its own
#: and the index; a worker runs one at a time).
KEPT_DATABASES = 4


class KeptConnectionsEventLogStorage(SqliteEventLogStorage):
    """Dagster's per-run SQLite event log with a connection kept open per recently used database."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None,
                 synchronous: Synchronous = "FULL") -> None:
        super().__init__(base_dir, inst_data)
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._empty_run_database: bytes | None = None
        self._present_tables: set[str] = set()
        self.synchronous = synchronous

    def _engine(self, shard: str) -> Engine:
        engine = create_engine(self.conn_string_for_shard(shard), pool_size=1,
                               connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
        event.listen(engine, "connect", lambda connection, _: connection.execute(
            f"PRAGMA synchronous={self.synchronous}"))
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engines.pop(shard, None) or self._engine(shard)
            self._engines[shard] = engine
            while len(self._engines) > KEPT_DATABASES:
                self._engines.popitem(last=False)[1].dispose()
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """A new run's database starts as a copy of an empty one this process initialized once:
        Dagster's own initialization (tables, indexes, migration stamp) took ~0.3 s per run."""
        path = Path(str(engine.url.database))
        if for_index_shard or path.exists():
            super()._initdb(engine, for_index_shard)
            return
        if self._empty_run_database is None:
            with tempfile.TemporaryDirectory() as folder:
                empty = create_engine(f"sqlite:///{Path(folder) / 'empty.db'}", poolclass=NullPool)
                super()._initdb(empty)
                empty.dispose()
                self._empty_run_database = (Path(folder) / "empty.db").read_bytes()
        try:
            with path.open("xb") as file:  # never over a database another process started
                file.write(self._empty_run_database)
        except FileExistsError:
            super()._initdb(engine, for_index_shard)

    def has_table(self, table_name: str) -> bool:
        """Remembered once present: Dagster asks before most events and partition lookups, each time
        opening the index database anew (~0.1 s of a tenant's run); migrations add tables, nothing
        here drops them."""
        if table_name not in self._present_tables and super().has_table(table_name):
            self._present_tables.add(table_name)
        return table_name in self._present_tables

    def _close_connections(self) -> None:
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self._close_connections()
        super().wipe()

    def dispose(self) -> None:
        self._close_connections()
        super().dispose()


class KeptConnectionsSqliteStorage(DagsterSqliteStorage):
    """``storage: sqlite`` with ``KeptConnectionsEventLogStorage`` as its event log; the same
    files in the same places, so an existing $DAGSTER_HOME keeps its history."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None,
                 synchronous: Synchronous = "FULL") -> None:
        super().__init__(base_dir, inst_data)
        self._event_log_storage = KeptConnectionsEventLogStorage(_event_logs_directory(base_dir),
                                                                 synchronous=synchronous)

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        return {"base_dir": StringSource, "synchronous": Field(
            Enum("SqliteSynchronous", [EnumValue("FULL"), EnumValue("NORMAL")]), default_value="FULL")}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: Any) -> Self:
        Path(config_value["base_dir"]).mkdir(parents=True, exist_ok=True)
        return cls(inst_data=inst_data, **config_value)
