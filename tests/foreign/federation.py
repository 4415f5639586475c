"""A federation gameday did not build: Debian's nginx and PowerDNS on loopback.

Three regions ``a``, ``b``, ``c``. Region N (1-based) lives on 127.0.(200+N).0/24, a range
the reference app (127.0.N.x for N <= 30, see ``gameday/targets/local/plan.py``) never uses:

- its **gateway** is an nginx master process on 127.0.(200+N).1, one port shared by every
  region (DNS carries no port), answering ``/healthz`` itself and proxying everything else
  to the region's backend;
- its **backend** is another nginx on 127.0.(200+N).10 that answers ``200`` with
  ``X-Served-By: <region>``, so a response tells which region served it.

The **GSLB** is PowerDNS Authoritative 4.7 (bind backend) on 127.0.200.1, serving one LUA
record for the service name::

    app IN LUA A "ifportup(PORT, {gateways}, {selector='all', backupSelector='all', timeout=1})"

PowerDNS 4.7's health checker (``pdns/lua-record.cc``, ``IsUpOracle::checkThread``) starts a
round of TCP connects to every checked address every ``lua-health-checks-interval``
seconds; **one** failed connect marks the address down and one success marks it up again
(4.7 has no rise/fall thresholds). ``lua-health-checks-expire-delay`` only drops a check no
query has asked about for that long; it is no part of the detection delay and is set long
so that checks are never dropped mid-drill. ``selector='all'`` answers every gateway that is
up (the regions are equal: PowerDNS 4.7's ``ifportup`` has no weighted selector, so the
profile gives every region the same weight); ``backupSelector='all'`` fails open, answering
every gateway when none is up. The packet and query caches are off, so an answer reflects
the checker's state at the moment of the query.

Every process is started by this module and stopped by :meth:`ForeignFederation.stop`;
:func:`processes_under` finds any that a path under the federation's directory names.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rdatatype
import httpx
import yaml

from gameday.runtime.ports import port_free
from tests.foreign.processes import alive, children, kill_tree, processes_under, wait_until
from tests.foreign.witness import HOST as CHECKER_HOST
from tests.foreign.witness import CheckerClock

ZONE = "foreign.test."
FQDN = "app.foreign.test."
DNS_HOST = "127.0.200.1"
REGION_NAMES = ("a", "b", "c")
CHECKER_LABEL = "checker"
CHECKER_FQDN = f"{CHECKER_LABEL}.{ZONE}"
SERVED_BY = "X-Served-By"
#: Where Debian puts the daemons; /usr/sbin is not on every user's PATH.
SBIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGES_SCRIPT = Path(__file__).with_name("debian-packages.sh")


@dataclass(frozen=True)
class CheckTiming:
    """PowerDNS's health checking of the gateways, as configured.

    Attributes:
        interval_s: ``lua-health-checks-interval``; a check round starts every interval (s).
            1 s, the smallest PowerDNS accepts, so a drill converges quickly.
        expire_delay_s: ``lua-health-checks-expire-delay`` (s): a check that no query asked
            about for this long is dropped (and the next query sees the address as down until
            the next round). Not part of detection; long, so no check expires mid-drill.
        timeout_s: ``ifportup``'s ``timeout`` option (s): a connect slower than this is a
            failure. A stopped gateway on loopback refuses at once, so it never applies here.
        ttl_s: TTL of the answers (s), what clients honour between resolutions.
        failures_to_down: consecutive failed checks before an address is left out; 1 is
            PowerDNS 4.7's fixed behaviour (no threshold setting exists in 4.7).
    """

    interval_s: int = 1
    expire_delay_s: int = 3600
    timeout_s: int = 1
    ttl_s: int = 1
    failures_to_down: int = 1

    @property
    def detection_bound_s(self) -> float:
        """Longest wait (s) from a gateway refusing connections to PowerDNS leaving it out:
        up to one interval until the next round starts, times the failures it needs (the
        refused connect itself takes well under a millisecond on loopback)."""
        return float(self.interval_s * self.failures_to_down)


@dataclass(frozen=True)
class Nginx:
    """One nginx master process with its own prefix, config, pid file and logs."""

    name: str
    prefix: Path
    binary: str

    @property
    def conf(self) -> Path:
        return self.prefix / "nginx.conf"

    @property
    def pid_file(self) -> Path:
        return self.prefix / "nginx.pid"

    @property
    def error_log(self) -> Path:
        return self.prefix / "logs" / "error.log"

    def _base(self) -> list[str]:
        # -e: the error log nginx writes before it has read the config (the compiled-in one
        # is /var/log/nginx, which a non-root user cannot open).
        return [self.binary, "-p", f"{self.prefix}/", "-c", str(self.conf), "-e", str(self.error_log)]

    def start_argv(self) -> list[str]:
        """Start the master (it daemonises once its sockets are bound, so the command returns then)."""
        return self._base()

    def stop_argv(self) -> list[str]:
        """Fast shutdown: SIGTERM to the master named in the pid file."""
        return [*self._base(), "-s", "stop"]

    def master_pid(self) -> int | None:
        """The running master's pid, or None when none runs."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if alive(pid) else None


@dataclass(frozen=True)
class Region:
    name: str
    number: int
    gateway: Nginx
    backend: Nginx

    @property
    def gateway_host(self) -> str:
        return region_host(self.number, 1)

    @property
    def backend_host(self) -> str:
        return region_host(self.number, 10)


def region_host(number: int, host: int) -> str:
    """Loopback address *host* of region *number* (1-based): 127.0.(200+number).host."""
    return f"127.0.{200 + number}.{host}"


@dataclass
class ForeignFederation:
    """Three nginx regions and a PowerDNS GSLB, planned into *root* (nothing runs until start)."""

    root: Path
    port: int
    backend_port: int
    dns_port: int
    nginx: str
    pdns_server: str
    checker_port: int = 0
    timing: CheckTiming = field(default_factory=CheckTiming)
    regions: tuple[Region, ...] = ()
    clock: CheckerClock | None = None
    """The checker's rounds as they happen (while the federation runs)."""
    _pdns: subprocess.Popen[bytes] | None = None

    # -- planning -----------------------------------------------------------------------------
    @classmethod
    def plan(cls, root: Path, timing: CheckTiming | None = None) -> ForeignFederation:
        """Pick free ports on the federation's addresses and write every config under *root*."""
        # The real path: start-stop-daemon --exec compares it with /proc/<pid>/exe.
        nginx, pdns_server = os.path.realpath(find_binary("nginx")), find_binary("pdns_server")
        gateways = [region_host(i + 1, 1) for i in range(len(REGION_NAMES))]
        backends = [region_host(i + 1, 10) for i in range(len(REGION_NAMES))]
        fed = cls(root=root, port=free_port(gateways), backend_port=free_port(backends),
                  dns_port=free_port([DNS_HOST], udp=True), checker_port=free_port([CHECKER_HOST]),
                  nginx=nginx, pdns_server=pdns_server,
                  timing=timing or CheckTiming())
        fed.regions = tuple(
            Region(name, i + 1, Nginx(f"gateway-{name}", root / name / "gateway", nginx),
                   Nginx(f"backend-{name}", root / name / "backend", nginx))
            for i, name in enumerate(REGION_NAMES))
        fed._write_configs()
        return fed

    @property
    def dns_dir(self) -> Path:
        return self.root / "dns"

    @property
    def pdns_log(self) -> Path:
        return self.dns_dir / "pdns.log"

    def region(self, name: str) -> Region:
        return next(r for r in self.regions if r.name == name)

    def gateway_hosts(self) -> tuple[str, ...]:
        return tuple(r.gateway_host for r in self.regions)

    def lua_record(self) -> str:
        """The content of the service name's LUA record (what PowerDNS evaluates per query)."""
        hosts = ",".join(f"'{h}'" for h in self.gateway_hosts())
        return (f"ifportup({self.port}, {{{hosts}}}, "
                f"{{selector='all', backupSelector='all', timeout={self.timing.timeout_s}}})")

    def _write_configs(self) -> None:
        for r in self.regions:
            _write_nginx(r.backend, f"""
    server {{
        listen {r.backend_host}:{self.backend_port};
        location / {{
            add_header {SERVED_BY} {r.name} always;
            return 200 "served by {r.name}\\n";
        }}
    }}""")
            _write_nginx(r.gateway, f"""
    upstream backend_{r.name} {{
        server {r.backend_host}:{self.backend_port};
        keepalive 16;
    }}
    server {{
        listen {r.gateway_host}:{self.port};
        location = /healthz {{
            return 200 "ok\\n";
        }}
        location / {{
            proxy_pass http://backend_{r.name};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
        }}
    }}""")
        d = self.dns_dir
        d.mkdir(parents=True, exist_ok=True)
        t = self.timing
        (d / "foreign.test.zone").write_text(
            f"$TTL {t.ttl_s}\n"
            f"@    IN SOA ns.{ZONE} hostmaster.{ZONE} 1 3600 600 86400 {t.ttl_s}\n"
            f"@    IN NS  ns.{ZONE}\n"
            f"ns   IN A   {DNS_HOST}\n"
            f'app  IN LUA A "{self.lua_record()}"\n'
            # Checked in the same rounds as the gateways; see witness.py.
            f'{CHECKER_LABEL} IN LUA A "ifportup({self.checker_port}, {{\'{CHECKER_HOST}\'}}, {{selector=\'all\'}})"\n')
        (d / "named.conf").write_text(f'zone "{ZONE.rstrip(".")}" {{ type master; file "{d}/foreign.test.zone"; }};\n')
        settings = {
            "launch": "bind",
            "bind-config": d / "named.conf",
            "local-address": DNS_HOST,
            "local-port": self.dns_port,
            "socket-dir": d,
            "guardian": "no",
            "daemon": "no",
            "disable-syslog": "yes",
            "loglevel": 6,  # Info: the checker's "declaring ... UP/DOWN" lines
            "enable-lua-records": "yes",
            "lua-health-checks-interval": t.interval_s,
            "lua-health-checks-expire-delay": t.expire_delay_s,
            # Off: a cached answer would outlive the checker's state by up to cache-ttl.
            "cache-ttl": 0,
            "query-cache-ttl": 0,
            "negquery-cache-ttl": 0,
            # Off: the security poll is a DNS query to powerdns.com; traffic stays on loopback.
            "security-poll-suffix": "",
            "webserver": "no",
            "api": "no",
            "receiver-threads": 1,
            "distributor-threads": 1,
        }
        (d / "pdns.conf").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    # -- running ------------------------------------------------------------------------------
    def start(self, timeout: float = 20.0) -> None:
        """Start every nginx and PowerDNS; return when DNS answers every gateway (``RuntimeError``)."""
        self.clock = CheckerClock(self.checker_port)
        self.clock.start()
        for r in self.regions:
            _run(r.backend.start_argv(), f"start {r.backend.name}")
            _run(r.gateway.start_argv(), f"start {r.gateway.name}")
        with self.pdns_log.open("ab") as log:
            self._pdns = subprocess.Popen([self.pdns_server, f"--config-dir={self.dns_dir}"],
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_steady(timeout)

    def wait_steady(self, timeout: float = 20.0) -> None:
        """Wait until every gateway serves its region and DNS answers all of them (``RuntimeError``).

        A fail-open answer (every gateway while none is known up) looks the same as a healthy
        one, so the checker's own log must have declared every gateway up as well.
        """
        deadline = time.monotonic() + timeout
        seen: object = None
        while time.monotonic() < deadline:
            if self._pdns is not None and self._pdns.poll() is not None:
                raise RuntimeError(f"pdns_server exited with {self._pdns.returncode}: {self._log_tail()}")
            served = {r.name: self.served_by(r) for r in self.regions}
            self.dns_answer(CHECKER_FQDN)  # asks the checker to connect to the clock every round
            answer = self.dns_answer()
            declared = self.declared_up()
            seen = (served, answer, sorted(declared))
            if (all(served[r.name] == r.name for r in self.regions) and answer is not None
                    and set(answer) == set(self.gateway_hosts()) and declared >= {*self.gateway_hosts(), CHECKER_HOST}):
                return
            time.sleep(0.1)
        raise RuntimeError(f"foreign federation not steady within {timeout} s: (served-by, DNS answer, "
                           f"checker declared up) = {seen}; pdns log: {self._log_tail()}")

    def declared_up(self) -> set[str]:
        """Gateways PowerDNS's checker currently holds up, from its log's UP/DOWN lines."""
        state: dict[str, bool] = {}
        try:
            lines = self.pdns_log.read_text(errors="replace").splitlines()
        except OSError:
            return set()
        for line in lines:
            if "monitoring declaring TCP/IP" not in line:
                continue
            addr = line.split("TCP/IP ", 1)[1].split(" ", 1)[0].rsplit(":", 1)[0]
            state[addr] = " UP" in line
        return {a for a, up in state.items() if up}

    def heal(self, timeout: float = 20.0) -> None:
        """Start any nginx that is not running, then :meth:`wait_steady`."""
        for r in self.regions:
            for n in (r.backend, r.gateway):
                if n.master_pid() is None:
                    _run(n.start_argv(), f"start {n.name}")
        self.wait_steady(timeout)

    def stop(self) -> None:
        """Stop every process this federation started (nginx masters, their workers, PowerDNS)."""
        for r in self.regions:
            for n in (r.gateway, r.backend):
                _stop_nginx(n)
        if self._pdns is not None and self._pdns.poll() is None:
            self._pdns.terminate()
            try:
                self._pdns.wait(5)
            except subprocess.TimeoutExpired:
                self._pdns.kill()
                self._pdns.wait(5)
        for pid in processes_under(self.root):  # anything still naming our files
            kill_tree(pid)
        if self.clock is not None:
            self.clock.stop()

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.pdns_log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    # -- observing ----------------------------------------------------------------------------
    def dns_answer(self, name: str = FQDN, timeout: float = 0.5) -> tuple[str, ...] | None:
        """The A addresses PowerDNS answers for *name* now (None: no answer in time)."""
        query = dns.message.make_query(name, dns.rdatatype.A)
        try:
            response = dns.query.udp(query, DNS_HOST, port=self.dns_port, timeout=timeout)
        except (dns.exception.DNSException, OSError):
            return None
        return tuple(sorted(rd.address for rrset in response.answer if rrset.rdtype == dns.rdatatype.A
                            for rd in rrset))

    def served_by(self, region: Region, timeout: float = 1.0) -> str | None:
        """The X-Served-By of a request through *region*'s gateway (None: no 200 answer)."""
        try:
            r = httpx.get(f"http://{region.gateway_host}:{self.port}/", headers={"Host": FQDN.rstrip(".")},
                          timeout=timeout, trust_env=False)
        except httpx.HTTPError:
            return None
        return r.headers.get(SERVED_BY) if r.status_code == 200 else None

    def gateway_accepts(self, region: Region) -> bool:
        """Whether *region*'s gateway port accepts a TCP connection (what ``ifportup`` checks)."""
        try:
            with socket.create_connection((region.gateway_host, self.port), timeout=0.2):
                return True
        except OSError:
            return False

    # -- the profile ----------------------------------------------------------------------------
    def fault_commands(self, region: Region) -> dict[str, dict[str, Any]]:
        """``gateway_down`` for *region*: stop its gateway's nginx; the inverse starts it again.

        Both through Debian's ``start-stop-daemon`` (dpkg, as Debian's own nginx init script
        does), without a shell: ``--stop --retry`` returns only once the master has exited
        (so the injection has taken effect when it returns), ``--start`` does nothing when
        the master named by the pid file runs, and ``--oknodo`` makes both succeed when
        there is nothing to do - the revert is idempotent, as ``gameday restore`` needs.
        """
        n = region.gateway
        ssd = find_binary("start-stop-daemon")
        match = ["--pidfile", str(n.pid_file), "--exec", n.binary]
        return {"inject": {"argv": [ssd, "--stop", "--oknodo", "--retry", "TERM/5/KILL/5", *match], "timeout": 15},
                "revert": {"argv": [ssd, "--start", "--oknodo", *match, "--", *n.start_argv()[1:]], "timeout": 15}}

    def profile(self, capacity_rps: float | None = None) -> dict[str, Any]:
        """The federation profile (contract B of issue 8) describing this federation.

        No entry-node, control-plane version or alarm source: nginx reports no route version
        and PowerDNS no routable set, so switchover is measured from DNS answers and the
        version and alarm verdicts are not applicable.
        """
        t = self.timing
        regions: list[dict[str, Any]] = []
        for r in self.regions:
            entry: dict[str, Any] = {"name": r.name, "gateway": r.gateway_host, "weight": 1,
                                     "faults": {"gateway_down": self.fault_commands(r)}}
            if capacity_rps is not None:
                entry["capacity_rps"] = capacity_rps
            regions.append(entry)
        return {
            "name": "foreign-nginx-powerdns",
            "service": {
                "fqdn": FQDN,
                "dns": {"server": DNS_HOST, "port": self.dns_port},
                "load": {"scheme": "http", "port": self.port, "path": "/", "host": FQDN.rstrip(".")},
                "served_by_header": SERVED_BY,
            },
            "regions": regions,
            # What PowerDNS is configured with (see CheckTiming); 4.7 takes a gateway out
            # after one failed check and puts it back after one good one.
            "timing": {"probe_interval": float(t.interval_s), "probe_timeout": float(t.timeout_s),
                       "fall": t.failures_to_down, "rise": 1, "dns_ttl": t.ttl_s},
        }

    def write_profile(self, path: Path, capacity_rps: float | None = None) -> Path:
        """Write :meth:`profile` as YAML to *path* (with a header naming the check timing)."""
        t = self.timing
        header = (f"# Foreign federation: Debian nginx gateways, PowerDNS {ZONE} GSLB on {DNS_HOST}:{self.dns_port}.\n"
                  f"# PowerDNS checks: lua-health-checks-interval={t.interval_s}s, "
                  f"lua-health-checks-expire-delay={t.expire_delay_s}s, ifportup timeout={t.timeout_s}s, "
                  f"{t.failures_to_down} failed check to leave a gateway out, TTL {t.ttl_s}s.\n")
        path.write_text(header + yaml.safe_dump(self.profile(capacity_rps), sort_keys=False))
        return path


# -- helpers ------------------------------------------------------------------------------------
def find_binary(name: str) -> str:
    """Absolute path of a Debian daemon (``FileNotFoundError`` when not installed)."""
    found = shutil.which(name, path=f"{os.environ.get('PATH', '')}:{SBIN_PATH}")
    if found is None:
        raise FileNotFoundError(f"{name} not found on PATH or in {SBIN_PATH}")
    return found


def free_port(hosts: Sequence[str], udp: bool = False, attempts: int = 200) -> int:
    """A port free (TCP, and UDP too when *udp*) on every host, below the ephemeral range."""
    kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if udp else (socket.SOCK_STREAM,)
    for _ in range(attempts):
        port = random.randrange(20000, 32700)
        if all(port_free(h, port, k) for h in hosts for k in kinds):
            return port
    raise RuntimeError(f"no port free on all of {list(hosts)} after {attempts} tries")


def _write_nginx(n: Nginx, servers: str) -> None:
    (n.prefix / "logs").mkdir(parents=True, exist_ok=True)
    tmp = n.prefix / "tmp"
    tmp.mkdir(exist_ok=True)
    # No `user` directive: as root the workers drop to nginx's compiled-in user, as anyone
    # else they run as that user; the temp paths keep nginx out of /var/lib/nginx.
    n.conf.write_text(f"""# {n.name}
worker_processes 1;
pid {n.pid_file};
error_log {n.error_log} info;
events {{ worker_connections 1024; }}
http {{
    access_log {n.prefix}/logs/access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
{servers}
}}
""")


def _run(argv: list[str], what: str, timeout: float = 15.0) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{what}: {argv} exited {r.returncode}: {r.stdout}{r.stderr}")


def _stop_nginx(n: Nginx, timeout: float = 5.0) -> None:
    pid = n.master_pid()
    if pid is None:
        return
    workers = children(pid)
    subprocess.run(n.stop_argv(), capture_output=True, timeout=15, check=False)
    if not wait_until(lambda: not alive(pid) and not any(alive(w) for w in workers), timeout):
        kill_tree(pid)
        for w in workers:
            kill_tree(w)
