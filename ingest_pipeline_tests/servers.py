"""PostgreSQL and an S3-compatible server (moto's standalone server) on loopback, started
and stopped by the tests that need them. Outside CI a missing binary skips such a test
with the reason; in CI (``CI`` set) it fails, since ``.ci/run`` installs both."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"CI must have this (installed by .ci/run): {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_tool(name: str) -> str | None:
    for folder in PG_BIN_DIRS:
        if (folder / name).exists():
            return str(folder / name)
    return shutil.which(name)


@dataclass
class Postgres:
    host: str
    port: int
    user: str
    password: str
    database: str
    folder: Path
    log: Path
    _as_user: list[str]
    _pg_ctl: str

    def env(self) -> dict[str, str]:
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.database,
        }

    def dump(self) -> bytes:
        """Every row of the instance database as text (for looking for leaked secrets)."""
        pg_dump = _pg_tool("pg_dump")
        env = {**os.environ, "PGPASSWORD": self.password}
        return subprocess.run(
            [pg_dump, "-h", self.host, "-p", str(self.port), "-U", self.user, "--data-only", self.database],
            env=env,
            check=True,
            capture_output=True,
        ).stdout

    def stop(self) -> None:
        subprocess.run(
            [*self._as_user, self._pg_ctl, "-D", str(self.folder / "db"), "-m", "fast", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres(password: str) -> Postgres:
    initdb, pg_ctl = _pg_tool("initdb"), _pg_tool("pg_ctl")
    if not initdb or not pg_ctl or not _pg_tool("pg_dump"):
        missing("PostgreSQL server binaries (initdb, pg_ctl) are not installed (Debian package postgresql)")
    # Its own folder under the system temp dir: pytest's are private to root, and the
    # server runs as another account.
    folder = Path(tempfile.mkdtemp(prefix="ingest-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root: run it as the postgres account
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            missing("running as root and there is no 'postgres' account to run the server as")
        os.chown(folder, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    pwfile = folder / "pw"
    pwfile.write_text(password)
    if as_user:
        os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
    pwfile.chmod(0o600)
    subprocess.run(
        [
            *as_user,
            initdb,
            "-D",
            str(folder / "db"),
            "-U",
            "dagster",
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    pwfile.unlink()
    port = free_port()
    log = folder / "server.log"
    subprocess.run(
        [
            *as_user,
            pg_ctl,
            "-D",
            str(folder / "db"),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-o",
            f"-h 127.0.0.1 -p {port} -k {folder}",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )
    server = Postgres("127.0.0.1", port, "dagster", password, "postgres", folder, log, as_user, pg_ctl)
    return server


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_s3(tmp: Path) -> S3Server:
    binary = Path(sys.executable).with_name("moto_server")
    if not binary.exists():
        missing("moto's standalone server is not installed (pip install 'moto[server]', in the dev extra)")
    port = free_port()
    log = tmp / "moto.log"
    process = subprocess.Popen(
        [str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(endpoint + "/", timeout=2).read()
            return S3Server(endpoint, process, log)
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.3)
    process.kill()
    raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}")
