"""Start, reuse and stop a throwaway PostgreSQL cluster for Dagster's instance storage.

Uses Debian's ``postgresql`` binaries (``make setup`` installs them) with ``initdb`` and
``pg_ctl`` only: no systemd, no ``pg_ctlcluster``, no system cluster touched. The cluster lives in
``home`` (data, log, generated password) and listens on 127.0.0.1 only, with password
(scram-sha-256) authentication like a real deployment. PostgreSQL refuses to run as root, so when
this runs as root the server runs as the ``postgres`` OS user that the Debian package creates.

    python -m mem_resources.local_servers.postgres up|down|status|env
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import typer
from psycopg2 import sql

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SUPERUSER = "memtend"
SERVICE_USER = "postgres"


class LocalPostgresError(RuntimeError):
    """The local cluster could not be prepared, started or reached."""


@dataclass(frozen=True)
class LocalPostgres:
    """Where the cluster lives and how clients reach it."""

    home: Path
    port: int = 5433
    db_name: str = "dagster"
    start_timeout_s: float = 60.0
    #: Off only for throwaway test clusters: faster commits, no crash safety.
    fsync: bool = True

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    @property
    def password_file(self) -> Path:
        return self.home / "password"

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    def dagster_env(self) -> dict[str, str]:
        """The variables ``deploy/dagster.yaml`` reads to reach this cluster."""
        return {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(self.port),
                "DAGSTER_PG_USER": SUPERUSER, "DAGSTER_PG_PASSWORD": self.password,
                "DAGSTER_PG_DB": self.db_name}


def find_bin(tool: str) -> Path:
    """A PostgreSQL server binary: on PATH, else the newest ``/usr/lib/postgresql/<v>/bin``."""
    if found := shutil.which(tool):
        return Path(found)
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if candidates:
        return Path(candidates[-1])
    raise LocalPostgresError(
        f"PostgreSQL's `{tool}` was not found (PATH, /usr/lib/postgresql/*/bin). "
        "Run `make setup`, which installs Debian's `postgresql` package.")


def _run_as() -> str | None:
    """The OS user to run the server as: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError as exc:
        raise LocalPostgresError(
            "PostgreSQL will not run as root and there is no `postgres` OS user to run it as; "
            "install Debian's `postgresql` package (it creates that user).") from exc
    return SERVICE_USER


def home_is_reachable(home: Path) -> bool:
    """Whether the server's OS user can reach ``home``: always for ourselves; as ``postgres``
    (when we are root) only if every existing ancestor is searchable by others (not /root)."""
    if os.geteuid() != 0:
        return True
    return all(parent.stat().st_mode & stat.S_IXOTH
               for parent in home.resolve().parents if parent.exists())


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user=user, group=pwd.getpwnam(user).pw_gid)


def _run(command: list[str], user: str | None, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, user=user, capture_output=True, text=True, check=False,
                          stdin=subprocess.DEVNULL, **kwargs)


def _initdb(cluster: LocalPostgres, user: str | None) -> None:
    cluster.home.mkdir(parents=True, exist_ok=True)
    _chown(cluster.home, user)
    if not cluster.password_file.exists():
        cluster.password_file.write_text(secrets.token_urlsafe(18))
        cluster.password_file.chmod(0o600)
    _chown(cluster.password_file, user)
    done = _run([str(find_bin("initdb")), "-D", str(cluster.data_dir), "-U", SUPERUSER,
                 "--pwfile", str(cluster.password_file), "--auth", "scram-sha-256",
                 "-E", "UTF8", "--locale", "C.UTF-8", "--no-instructions"], user)
    if done.returncode != 0:
        raise LocalPostgresError(f"initdb failed:\n{done.stdout}{done.stderr}")


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _connect(cluster: LocalPostgres, db_name: str = "postgres", timeout_s: int = 3):
    return psycopg2.connect(host="127.0.0.1", port=cluster.port, user=SUPERUSER,
                            password=cluster.password, dbname=db_name, connect_timeout=timeout_s)


def answers(cluster: LocalPostgres) -> bool:
    """True when our cluster accepts our credentials on its port."""
    if not cluster.password_file.exists():
        return False
    try:
        _connect(cluster).close()
    except psycopg2.OperationalError:
        return False
    return True


def _ensure_database(cluster: LocalPostgres) -> None:
    conn = _connect(cluster)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (cluster.db_name,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(cluster.db_name)))
    finally:
        conn.close()


def up(cluster: LocalPostgres) -> LocalPostgres:
    """Create the cluster on first use, start it unless it already runs, ensure the database."""
    if answers(cluster):
        _ensure_database(cluster)
        return cluster
    if _port_in_use(cluster.port):
        raise LocalPostgresError(f"Port {cluster.port} is taken by something that is not this "
                                 f"cluster ({cluster.home}); choose another port.")
    user = _run_as()
    if not home_is_reachable(cluster.home):
        raise LocalPostgresError(f"{cluster.home} is inside a folder the `postgres` OS user cannot "
                                 "enter; choose a home under a world-searchable folder (e.g. /tmp).")
    if not (cluster.data_dir / "PG_VERSION").exists():
        _initdb(cluster, user)
    cluster.log_file.touch()
    _chown(cluster.log_file, user)
    options = (f"-p {cluster.port} -c listen_addresses=127.0.0.1 "
               f"-c unix_socket_directories='{cluster.home}' -c max_connections=200"
               + ("" if cluster.fsync else " -c fsync=off -c synchronous_commit=off"))
    started = _run([str(find_bin("pg_ctl")), "-D", str(cluster.data_dir), "-l", str(cluster.log_file),
                    "-o", options, "-w", "-t", str(int(cluster.start_timeout_s)), "start"], user)
    if started.returncode != 0:
        log = cluster.log_file.read_text(errors="replace")[-2000:]
        raise LocalPostgresError(f"pg_ctl start failed:\n{started.stdout}{started.stderr}\n{log}")
    deadline = time.monotonic() + cluster.start_timeout_s
    while not answers(cluster):
        if time.monotonic() > deadline:
            raise LocalPostgresError(f"PostgreSQL did not accept connections on port {cluster.port}; "
                                     f"see {cluster.log_file}")
        time.sleep(0.2)
    _ensure_database(cluster)
    return cluster


def running(cluster: LocalPostgres) -> bool:
    return (cluster.data_dir / "postmaster.pid").exists()


def down(cluster: LocalPostgres) -> bool:
    """Stop the cluster (fast shutdown); True if it was running."""
    if not running(cluster):
        return False
    stopped = _run([str(find_bin("pg_ctl")), "-D", str(cluster.data_dir), "-m", "fast", "-w", "stop"],
                   _run_as())
    if stopped.returncode != 0 and running(cluster):
        raise LocalPostgresError(f"pg_ctl stop failed:\n{stopped.stdout}{stopped.stderr}")
    return True


cli = typer.Typer(add_completion=False, help="Manage a local PostgreSQL for Dagster's instance storage.")
HomeOption = typer.Option(PROJECT_ROOT / ".postgres", help="Folder for the cluster's data, log and password.")
PortOption = typer.Option(5433, help="TCP port on 127.0.0.1.")


@cli.command("up")
def up_command(home: Path = HomeOption, port: int = PortOption) -> None:
    """Start (or reuse) the cluster and print how to point deploy/dagster.yaml at it."""
    try:
        cluster = up(LocalPostgres(home=home.resolve(), port=port))
    except LocalPostgresError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{cluster.db_name} (password in "
               f"{cluster.password_file}); `eval $(python -m mem_resources.local_servers.postgres env)` "
               "exports the DAGSTER_PG_* variables")


@cli.command("env")
def env_command(home: Path = HomeOption, port: int = PortOption) -> None:
    """Print ``export DAGSTER_PG_...=...`` lines for a running cluster."""
    cluster = LocalPostgres(home=home.resolve(), port=port)
    if not answers(cluster):
        typer.echo("error: the cluster is not running; run `up` first", err=True)
        raise typer.Exit(1)
    for key, value in cluster.dagster_env().items():
        typer.echo(f"export {key}={value}")


@cli.command("down")
def down_command(home: Path = HomeOption, port: int = PortOption) -> None:
    """Stop the cluster."""
    typer.echo("stopped" if down(LocalPostgres(home=home.resolve(), port=port)) else "not running")


@cli.command("status")
def status_command(home: Path = HomeOption, port: int = PortOption) -> None:
    """Say whether the cluster runs and accepts connections."""
    cluster = LocalPostgres(home=home.resolve(), port=port)
    ok = answers(cluster)
    typer.echo(f"home={cluster.home} port={port} answering={ok}")
    raise typer.Exit(0 if ok else 3)


if __name__ == "__main__":
    sys.exit(cli())
