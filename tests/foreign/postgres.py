"""A stateful federation gameday did not build: a PostgreSQL primary and streaming standby
(Debian's ``postgresql``), a tiny HTTP service per region in front of them (``pgservice.py``) and
a DNS server answering the service's name with both regions.

- Two regions ``a`` and ``b``: region N's service listens on 127.0.(220+N).1 (one port for
  both: DNS carries no port), a range neither the reference app nor the nginx/PowerDNS
  federation uses. Each request reaches whichever node is the primary now (libpq's
  ``target_session_attrs=read-write``).
- Two PostgreSQL 15 servers ``pg1`` (primary at first) and ``pg2`` (its standby, made with
  ``pg_basebackup -R``), on 127.0.0.1 at free ports, asynchronous unless made synchronous
  (``synchronous_standby_names = '*'``). ``initdb`` refuses root: as root the servers run as
  ``nobody`` (``setpriv``), their files in a directory of their own under /tmp (pytest's own
  temporary directories are root's alone).
- The failover and its inverse are ``pgctl.py failover`` and ``pgctl.py heal``, named by the
  profile as the fault ``pg_failover`` (see :meth:`PgFederation.profile`).

Every process is started here and stopped by :meth:`PgFederation.stop`: the services by pid,
the servers through their postmasters (``pg_ctl stop``); :meth:`PgFederation.leftovers` names any
process that outlived it, by the unique ``cluster_name`` in the servers' process titles.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.external.loopback_state import LoopbackDns
from tests.foreign import pgctl
from tests.foreign.federation import free_port
from tests.foreign.processes import alive, kill_tree, processes_under, wait_until

FQDN = "pg.foreign.test."
REGIONS = ("a", "b")
SYSTEM_PYTHON = "/usr/bin/python3"
SERVICE = Path(__file__).with_name("pgservice.py")
PGCTL = Path(__file__).with_name("pgctl.py")
#: The Debian packages this federation needs (installed like the nginx/PowerDNS ones).
PACKAGES = "postgresql python3-psycopg"
#: The user the servers run as when the tests run as root (``initdb`` refuses root).
NOBODY = 65534


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL's binaries (``/usr/lib/postgresql/<v>/bin``), or None."""
    found = sorted(glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def missing() -> str | None:
    """Why this federation cannot run here (None: it can)."""
    if pg_bin() is None:
        return "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb)"
    r = subprocess.run([SYSTEM_PYTHON, "-c", "import psycopg"], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return f"{SYSTEM_PYTHON} cannot import psycopg (Debian's python3-psycopg): {r.stderr.strip()[-200:]}"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root without setpriv: cannot run PostgreSQL as another user"
    return None


@dataclass
class PgFederation:
    """Planned into a new directory under /tmp (nothing runs until :meth:`start`)."""

    root: Path
    bin: Path
    service_port: int
    ports: dict[str, int]
    dns: LoopbackDns | None = None
    services: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @classmethod
    def plan(cls) -> PgFederation:
        binaries = pg_bin()
        assert binaries is not None, missing()
        root = Path(tempfile.mkdtemp(prefix="gameday-pg-"))
        gateways = [gateway(r) for r in REGIONS]
        p1 = free_port(["127.0.0.1"])
        p2 = free_port(["127.0.0.1"])
        while p2 == p1:
            p2 = free_port(["127.0.0.1"])
        return cls(root=root, bin=binaries, service_port=free_port(gateways), ports={"pg1": p1, "pg2": p2})

    @property
    def tag(self) -> str:
        """Unique to this federation: its servers' ``cluster_name`` starts with it."""
        return self.root.name.removeprefix("gameday-pg-").lower().replace("_", "")

    # -- running --------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return pgctl.load(self.root)

    def start(self, *, sync: bool = False) -> None:
        """Initialise and start the primary, its standby, the services and the DNS server."""
        run_as = ([] if os.geteuid() != 0 else
                  ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"])
        for d in ("logs", "sock"):
            (self.root / d).mkdir()
        if run_as:
            for p in (self.root, self.root / "logs", self.root / "sock"):
                os.chown(p, NOBODY, NOBODY)
        st: dict[str, Any] = {
            "root": str(self.root), "bin": str(self.bin), "run_as": run_as, "tag": self.tag, "primary": "pg1",
            "sync": sync,
            "nodes": {n: {"port": port, "data": str(self.root / n)} for n, port in self.ports.items()},
        }
        pgctl.save(self.root, st)
        pgctl.pg(st, "initdb", "-D", st["nodes"]["pg1"]["data"], "-U", "postgres", "-A", "trust", "-E", "UTF8",
                 "--no-sync", "--no-instructions", timeout=60)
        data = Path(st["nodes"]["pg1"]["data"])
        with (data / "postgresql.conf").open("a") as fh:
            fh.write(f"""
# gameday's foreign PostgreSQL federation (tests/foreign/postgres.py)
listen_addresses = '127.0.0.1'
unix_socket_directories = '{self.root / "sock"}'
wal_level = replica
max_wal_senders = 4
wal_keep_size = '64MB'
hot_standby = on
max_connections = 60
shared_buffers = '16MB'
# Process loss, not power loss, is drilled: a killed server's writes stay in the kernel's cache.
fsync = off
synchronous_commit = on
log_min_messages = warning
""")
        with (data / "pg_hba.conf").open("a") as fh:
            fh.write("host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n")
        pgctl._configure(st, "pg1")
        pgctl.start(st, "pg1")
        pgctl.sql(st, "pg1", f"CREATE TABLE {pgctl.TABLE} (id text PRIMARY KEY, seq bigserial, region text, "
                             "at timestamptz DEFAULT now())")
        pgctl.make_standby(st, "pg2")
        pgctl.apply_mode(st)
        pgctl.wait_for("pg2 streaming", lambda: pgctl.streaming(st), 30)
        conninfo = (f"host=127.0.0.1,127.0.0.1 port={self.ports['pg1']},{self.ports['pg2']} user=postgres "
                    "dbname=postgres target_session_attrs=read-write connect_timeout=2")
        for region in REGIONS:
            log = (self.root / "logs" / f"service-{region}.log").open("ab")
            self.services[region] = subprocess.Popen(
                [SYSTEM_PYTHON, str(SERVICE), "--region", region, "--listen", f"{gateway(region)}:{self.service_port}",
                 "--conninfo", conninfo], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
            log.close()
        self.dns = LoopbackDns(FQDN, [gateway(r) for r in REGIONS]).start()
        self.wait_steady()

    def wait_steady(self, timeout: float = 30.0) -> None:
        """Both services answer, and a write through each reaches the primary (``RuntimeError``)."""
        seen: object = None

        def ready() -> bool:
            nonlocal seen
            for region, proc in self.services.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"service {region} exited {proc.returncode}: {self.log_tail(region)}")
            try:
                seen = [httpx.post(f"http://{gateway(r)}:{self.service_port}/data/steady-{r}-{time.monotonic_ns()}",
                                   timeout=2, trust_env=False).status_code for r in REGIONS]
            except httpx.HTTPError as exc:
                seen = repr(exc)
                return False
            return seen == [201, 201] and pgctl.streaming(self.state())

        if not wait_until(ready, timeout, interval=0.1):
            raise RuntimeError(f"PostgreSQL federation not steady within {timeout:g} s: {seen}")

    def heal(self) -> None:
        """What the fault's revert does (idempotent), then :meth:`wait_steady`."""
        pgctl.heal(self.root)
        self.wait_steady()

    def set_sync(self, sync: bool) -> None:
        pgctl.set_sync(self.root, sync)

    def stop(self) -> None:
        """Stop every process this federation started; its directory is removed once none is left."""
        for proc in self.services.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        if self.dns is not None:
            self.dns.stop()
        try:
            st = self.state()
        except OSError:
            st = None
        if st is not None:
            for node in st["nodes"]:
                pgctl.stop(st, node, "immediate")
        for pid in self.leftovers():
            kill_tree(pid)
        wait_until(lambda: not self.leftovers(), 5)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self) -> list[int]:
        """Live processes of this federation: those naming its directory, their children, and any
        postgres process whose title names this federation's ``cluster_name``."""
        found = set(processes_under(self.root))
        needle = f"postgres: {self.tag}-".encode()
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if cmdline.read_bytes().startswith(needle):
                    found.add(int(cmdline.parent.name))
            except OSError:
                continue
        return sorted(p for p in found if alive(p))

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.root / "logs" / (f"service-{name}.log" if name in REGIONS else f"{name}.log")
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    # -- reading it -------------------------------------------------------------------------------
    def count(self, where: str = "true") -> int:
        st = self.state()
        return int(pgctl.sql(st, st["primary"], f"SELECT count(*) FROM {pgctl.TABLE} WHERE {where}"))

    # -- the profile ------------------------------------------------------------------------------
    def fault(self, cut: float) -> dict[str, Any]:
        """``pg_failover``: the standby cut off for *cut* seconds, then the primary stopped
        (immediate) and the standby promoted; the inverse re-creates the old primary as the new
        one's standby (idempotent)."""
        return {"inject": {"argv": [sys.executable, str(PGCTL), "failover", str(self.root), "--cut", f"{cut:g}"],
                           "timeout": 60},
                "revert": {"argv": [sys.executable, str(PGCTL), "heal", str(self.root)], "timeout": 90},
                "takes_region_out": False}

    def profile(self, *, replication: str, max_lag: float | None, cut: float, write_rate: float,
                state: bool = True) -> dict[str, Any]:
        assert self.dns is not None
        data: dict[str, Any] = {
            "name": "foreign-postgresql",
            "service": {"fqdn": FQDN, "dns": {"server": self.dns.address[0], "port": self.dns.address[1]},
                        "load": {"scheme": "http", "port": self.service_port, "path": "/"},
                        "served_by_header": "X-Served-By"},
            "regions": [{"name": r, "gateway": gateway(r), "weight": 1} for r in REGIONS],
            "faults": {"pg_failover": self.fault(cut)},
            "timing": {"dns_ttl": self.dns.ttl},
        }
        if state:
            data["state"] = {
                "replication": replication, **({"max_lag": max_lag} if max_lag is not None else {}),
                "write_rate": write_rate, "write_timeout": 1.0,
                # the service's own answer: {"id", "node", "seq"}; read back one GET per id (200/404)
                "http": {"write": {"method": "POST", "path": "/data/{id}", "acked_by": "node", "seq": "seq"},
                         "read_back": {"get": "/data/{id}", "concurrency": 8}},
            }
        return data

    def write_profile(self, path: Path, **kwargs: Any) -> Path:
        path.write_text(yaml.safe_dump(self.profile(**kwargs), sort_keys=False), encoding="utf-8")
        return path


def gateway(region: str) -> str:
    return f"127.0.{221 + REGIONS.index(region)}.1"
