"""Start, reuse and stop a local Neo4j 5.26 Community server without Docker.

The server jars come from Maven Central (``neo4j_server/pom.xml``); a one-file Java main
(``neo4j_server/LocalNeo4j.java``) runs the embedded DBMS with Bolt on 127.0.0.1.
State (data, logs, pid, resolved classpath) lives in ``$MEMTEND_NEO4J_HOME`` (default
``.neo4j/`` in the project root, git-ignored). When ``NEO4J_URI`` is set, that server is
used and nothing is started. Settings come from ``mem_resources.settings``. With ``password``
set the server requires authentication (user ``neo4j``, that initial password), like any deployed
Neo4j.

    python -m mem_resources.local_servers.neo4j up|down|status
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import typer
from neo4j import GraphDatabase
from neo4j.exceptions import Neo4jError, ServiceUnavailable

from mem_resources.settings import Settings, load_settings

SERVER_DIR = Path(__file__).parent / "neo4j_server"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
STARTED_MARKER = b"memtend-local-neo4j: started"
JVM_FLAGS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
]


class LocalNeo4jError(RuntimeError):
    """The local server could not be prepared, started or reached."""


@dataclass(frozen=True)
class LocalNeo4jSettings:
    home: Path
    port: int
    heap: str
    pagecache: str
    start_timeout_s: float
    #: None: no authentication. Else auth is on and user ``neo4j`` starts with this password.
    password: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalNeo4jSettings:
        return cls(
            home=settings.local_neo4j_home.resolve(),
            port=settings.local_neo4j_port,
            heap=settings.local_neo4j_heap,
            pagecache=settings.local_neo4j_pagecache,
            start_timeout_s=settings.local_neo4j_start_timeout_s,
        )

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.port}"

    @property
    def auth(self) -> tuple[str, str] | None:
        return ("neo4j", self.password) if self.password is not None else None

    @property
    def pid_file(self) -> Path:
        return self.home / "neo4j.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "neo4j.out.log"


def _require(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise LocalNeo4jError(f"`{tool}` was not found on PATH. {hint}")
    return path


def _java_major(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    version = out.split('"')[1] if '"' in out else "0"
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


def resolve_classpath(settings: LocalNeo4jSettings) -> str:
    """Resolve the server classpath with Maven once per pom version; later calls read the cache."""
    pom = SERVER_DIR / "pom.xml"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    cache = settings.home / f"classpath-{digest}.txt"
    if cache.exists():
        return cache.read_text().strip()
    mvn = _require("mvn", "Install Maven (Debian: apt-get install maven) to fetch the Neo4j jars.")
    settings.home.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [mvn, "-B", "-q", "-f", str(pom), "dependency:build-classpath",
         f"-Dmdep.outputFile={cache}"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0 or not cache.exists():
        cache.unlink(missing_ok=True)
        raise LocalNeo4jError(f"Maven could not resolve the Neo4j jars:\n{result.stdout}{result.stderr}")
    return cache.read_text().strip()


def _write_conf(settings: LocalNeo4jSettings) -> Path:
    conf = settings.home / "neo4j.conf"
    conf.write_text(
        "\n".join([
            "server.bolt.enabled=true",
            f"server.bolt.listen_address=127.0.0.1:{settings.port}",
            "server.http.enabled=false",
            "server.https.enabled=false",
            f"dbms.security.auth_enabled={'true' if settings.password is not None else 'false'}",
            f"server.memory.pagecache.size={settings.pagecache}",
            "db.tx_log.preallocate=false",
            "db.tx_log.rotation.retention_policy=2 files",
            "dbms.usage_report.enabled=false",
            "",
        ])
    )
    return conf


_EXEC_WITH_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "for name in ('SIGTERM', 'SIGINT', 'SIGHUP', 'SIGPIPE', 'SIGXFSZ'):\n"
    "    signal.signal(getattr(signal, name), signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def _spawn(argv: list[str], log: IO[bytes]) -> int:
    """Start ``argv`` (the JVM) in its own session, output to ``log``, with the shutdown signals
    at their defaults: a JVM that inherits an ignored SIGTERM never runs its shutdown hook, so
    ``down`` could only kill it after its timeout (an unclean stop), and a caller can ignore
    SIGTERM without knowing (Dagster maps SIGTERM to SIGINT's handler, and a background job
    ignores SIGINT). A signal ignored at exec stays ignored, and resetting it between fork and exec
    is not thread-safe from Python, so a short Python step resets them and execs the JVM in place
    (same pid)."""
    return subprocess.Popen([sys.executable, "-c", _EXEC_WITH_DEFAULT_SIGNALS, *argv], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True).pid


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a server this process started and that has exited is reaped here."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_pid(settings: LocalNeo4jSettings) -> int | None:
    try:
        pid = int(settings.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def bolt_answers(uri: str, timeout_s: float = 2.0, auth: tuple[str, str] | None = None) -> bool:
    """True when a server on ``uri`` accepts these credentials (or none, without auth)."""
    try:
        with GraphDatabase.driver(uri, auth=auth, connection_timeout=timeout_s) as driver:
            driver.verify_connectivity()
        return True
    except (ServiceUnavailable, Neo4jError, OSError):
        return False


def _port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _started(settings: LocalNeo4jSettings, log_offset: int | None) -> bool:
    """The main we launched has finished start-up (and set the initial password): polling with
    credentials before that would count as failed logins and trip Neo4j's login rate limit."""
    if settings.password is None or log_offset is None:
        return True
    try:
        with settings.log_file.open("rb") as log:
            log.seek(log_offset)
            return STARTED_MARKER in log.read()
    except FileNotFoundError:
        return False


def up(settings: LocalNeo4jSettings) -> str:
    """Start the server, or reuse the one already running; return its Bolt URI once it answers.
    Callers at the same moment (parallel test workers, a bench started beside `make demo`) start
    one server: a lock file in its home lets one start it while the others wait, then reuse it."""
    settings.home.mkdir(parents=True, exist_ok=True)
    with (settings.home / "start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _start_or_reuse(settings)


def _start_or_reuse(settings: LocalNeo4jSettings) -> str:
    pid = _read_pid(settings)
    if pid is not None and bolt_answers(settings.uri, auth=settings.auth):
        return settings.uri
    if pid is None and _port_in_use(settings.port):
        if bolt_answers(settings.uri, auth=settings.auth):
            return settings.uri
        raise LocalNeo4jError(
            f"Port {settings.port} is taken by something that is not Neo4j; "
            "set MEMTEND_NEO4J_PORT to a free port."
        )
    log_offset: int | None = None
    if pid is None:
        java = _require("java", "Install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless).")
        if _java_major(java) < 17:
            raise LocalNeo4jError("Neo4j 5.26 needs Java 17 or newer; `java -version` reports an older one.")
        classpath = resolve_classpath(settings)
        conf = _write_conf(settings)
        (settings.home / "data").mkdir(parents=True, exist_ok=True)
        password_file = settings.home / "initial-password"
        password_file.unlink(missing_ok=True)
        if settings.password is not None:
            password_file.touch(mode=0o600)
            password_file.write_text(settings.password)
        log_offset = settings.log_file.stat().st_size if settings.log_file.exists() else 0
        with settings.log_file.open("ab") as log:
            pid = _spawn([java, f"-Xmx{settings.heap}", f"-Xms{settings.heap}", *JVM_FLAGS,
                          "-cp", classpath, str(SERVER_DIR / "LocalNeo4j.java"),
                          str(settings.home / "dbms"), str(conf), str(password_file)], log)
        settings.pid_file.write_text(str(pid))
    deadline = time.monotonic() + settings.start_timeout_s
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            raise LocalNeo4jError(f"Neo4j exited during start; see {settings.log_file}")
        if _started(settings, log_offset) and bolt_answers(settings.uri, auth=settings.auth):
            return settings.uri
        time.sleep(0.5)
    raise LocalNeo4jError(f"Neo4j did not answer on {settings.uri} within "
                          f"{settings.start_timeout_s:.0f}s; see {settings.log_file}")


def down(settings: LocalNeo4jSettings, timeout_s: float = 60.0) -> bool:
    """Stop the server cleanly (SIGTERM runs the DBMS shutdown hook); True if one was running."""
    pid = _read_pid(settings)
    if pid is None:
        settings.pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    settings.pid_file.unlink(missing_ok=True)
    return True


def ensure_neo4j_uri(settings: Settings) -> str:
    """The URI to use: ``NEO4J_URI`` when set (nothing is started), else the local server's."""
    return settings.neo4j_uri or up(LocalNeo4jSettings.from_settings(settings))


cli = typer.Typer(add_completion=False, help="Manage the project's local Neo4j server.")
PasswordOption = typer.Option(
    None, help="Enable authentication; user neo4j gets this initial password (min. 8 characters).")


@cli.command("up")
def up_command(password: str | None = PasswordOption) -> None:
    """Start (or reuse) the local server and print its Bolt URI."""
    settings = load_settings()
    if settings.neo4j_uri:
        typer.echo(f"NEO4J_URI is set ({settings.neo4j_uri}); not starting a local server.")
        return
    try:
        typer.echo(up(dataclasses.replace(LocalNeo4jSettings.from_settings(settings),
                                          password=password)))
    except LocalNeo4jError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@cli.command("down")
def down_command() -> None:
    """Stop the local server."""
    typer.echo("stopped" if down(LocalNeo4jSettings.from_settings(load_settings())) else "not running")


@cli.command("status")
def status_command(password: str | None = PasswordOption) -> None:
    """Say whether the local server runs and answers."""
    settings = dataclasses.replace(LocalNeo4jSettings.from_settings(load_settings()), password=password)
    pid = _read_pid(settings)
    answering = bolt_answers(settings.uri, auth=settings.auth)
    typer.echo(f"pid={pid} uri={settings.uri} answering={answering}")
    raise typer.Exit(0 if answering else 3)


if __name__ == "__main__":
    sys.exit(cli())
