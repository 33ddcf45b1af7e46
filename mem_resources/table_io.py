"""Step outputs (pandas tables) stored without pickle, on a local folder or an object store.

A table is one zip file: ``table.json`` (pandas "table" orient: column types, timestamps with
their zone) plus one ``<column>.npy`` per column of vectors (embeddings), stacked into a matrix,
saved with ``allow_pickle=False``; the frame's ``attrs`` (counts a step hands the next one, such
as the number of new nodes) as ``attrs.json``; a column of vectors of different lengths (the reorganization's
candidates: each language's topic space has its own size) is saved flat with
``<column>.lengths.npy``. Loading never executes stored code, and files do not depend on
the Python or pandas version that wrote them. ``base_path`` is a folder or any fsspec URL
(``s3://bucket/prefix`` with s3fs, ``gs://`` with gcsfs, ``az://`` with adlfs), so the step that
reads a table can run in another process, pod or machine than the step that wrote it.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable

import dagster as dg
import numpy as np
import pandas as pd
from upath import UPath

from mem_resources.settings import PROJECT_ROOT, Settings

TABLE = "table.json"
ATTRS = "attrs.json"
SUFFIX = ".table.zip"


def _is_vector_column(column: pd.Series) -> bool:
    return len(column) > 0 and column.map(lambda value: isinstance(value, np.ndarray)).all()


def dump_table(frame: pd.DataFrame) -> bytes:
    vectors = [name for name in frame.columns if _is_vector_column(frame[name])]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(TABLE, frame.drop(columns=vectors).to_json(
            orient="table", index=False, date_format="iso", double_precision=15))
        for name in vectors:
            rows = frame[name].to_list()
            if len({row.shape for row in rows}) == 1:
                archive.writestr(f"{name}.npy", _npy(np.stack(rows)))
            else:
                archive.writestr(f"{name}.npy", _npy(np.concatenate([row.ravel() for row in rows])))
                archive.writestr(f"{name}.lengths.npy", _npy(np.array([row.size for row in rows], dtype=np.int64)))
        archive.writestr("columns.json", json.dumps([str(name) for name in frame.columns]))
        archive.writestr(ATTRS, json.dumps(frame.attrs, default=_plain))
    return buffer.getvalue()


def _plain(value: object) -> object:
    """numpy scalars in ``attrs`` as plain numbers; anything else is refused loudly."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"attrs value {value!r} is not JSON")


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def load_table(data: bytes) -> pd.DataFrame:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        frame = pd.read_json(io.StringIO(archive.read(TABLE).decode()), orient="table")
        columns = json.loads(archive.read("columns.json"))
        stored = set(archive.namelist())
        for name in columns:
            if name not in frame.columns:
                matrix = np.load(io.BytesIO(archive.read(f"{name}.npy")), allow_pickle=False)
                if f"{name}.lengths.npy" in stored:
                    lengths = np.load(io.BytesIO(archive.read(f"{name}.lengths.npy")), allow_pickle=False)
                    frame[name] = pd.Series(np.split(matrix, np.cumsum(lengths)[:-1]), index=frame.index,
                                            dtype=object)
                else:
                    frame[name] = list(matrix)
        attrs = json.loads(archive.read(ATTRS)) if ATTRS in stored else {}
    frame = frame[columns].reset_index(drop=True)
    frame.attrs.update(attrs)
    return frame


def table_base(settings: Settings) -> str:
    """``MEMTEND_IO_BASE``, else ``storage/`` in the Dagster home (as Dagster's own default)."""
    return settings.io_base or str(UPath(settings.dagster_home or PROJECT_ROOT / "dagster_home")
                                   / "storage")


class TableIOManager(dg.ConfigurableIOManager):
    """Tables under ``<base_path>/<asset>/<partition>.table.zip``."""

    base_path: str

    def _path(self, asset_key: dg.AssetKey, partition: str) -> UPath:
        return UPath(self.base_path).joinpath(*asset_key.path, f"{partition}{SUFFIX}")

    @staticmethod
    def _partition(context: dg.OutputContext | dg.InputContext) -> str:
        return context.asset_partition_key if context.has_asset_partitions else "__unpartitioned__"

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame | None) -> None:
        if obj is None:
            return
        path = self._path(context.asset_key, self._partition(context))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = dump_table(obj)
        path.write_bytes(data)
        context.add_output_metadata({"stored_at": dg.MetadataValue.path(str(path)),
                                     "stored_bytes": len(data)})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        return load_table(self._path(context.asset_key, self._partition(context)).read_bytes())

    def wipe_partition(self, asset_keys: Iterable[dg.AssetKey], partition: str) -> int:
        """Delete the stored tables of one partition (a dropped tenant); returns how many."""
        removed = 0
        for asset_key in asset_keys:
            path = self._path(asset_key, partition)
            if path.exists():
                path.unlink()
                removed += 1
        return removed
