"""Real load with locust, run in separate processes and read back as request records.

locust is never imported here (it monkey-patches the interpreter with gevent on
import); it runs headless in its own process - or as a master with N workers, the
way users scale it across machines - and each process appends JSON lines that
:meth:`LoadRunner.poll` turns into :class:`~gameday.model.timeline.RequestRec`.

Every locust process dies with the runner, ``kill -9`` included (a death signal where
the OS has one, :mod:`gameday.runtime.procs`), and is recorded in the run's process registry so
``gameday restore`` and ``gameday down`` stop it anyway.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from gameday.errors import LoadError
from gameday.load.generator import RecordedLoad
from gameday.model.parts import LOAD_ROLE, ComponentState, Endpoints
from gameday.model.timeline import RequestRec
from gameday.runtime.interrupts import INTERRUPTS
from gameday.runtime.ports import free_port, release
from gameday.runtime.procs import ProcRegistry, spawn

BUILTIN_LOCUSTFILE = Path(__file__).with_name("locustfile.py")
_SIGNALS = {int(s) for s in signal.Signals}
WORKER_COMMAND = "python -m gameday.load.worker --master {host}:{port}"
"""What a user runs on each load machine (README, "Load from more than one machine")."""


class LoadRunner(RecordedLoad):
    """A bounded locust run against a federation's service name (gameday's built-in
    :class:`~gameday.load.generator.LoadGenerator`)."""

    def __init__(
        self,
        endpoints: Endpoints,
        *,
        users: int,
        rate: float,
        workdir: Path,
        locustfile: Path | None = None,
        workers: int = 0,
        max_seconds: float = 900.0,
        timeout: float = 1.0,
        registry: ProcRegistry | None = None,
        expect_workers: int = 0,
        master_bind: tuple[str, int] = ("0.0.0.0", 5557),
        workers_wait: float = 120.0,
    ) -> None:
        """
        Args:
            endpoints: where the GSLB and gateways are.
            users: simulated clients; each resolves and caches the service name by TTL.
            rate: offered requests/s across all users (constant throughput).
            workdir: where records and locust's log go.
            locustfile: a user-supplied locustfile (default: the built-in user).
            workers: 0 for a single process, N for a master with N workers.
            max_seconds: hard bound on the run (locust --run-time); the runner stops
                earlier when :meth:`stop` is called.
            timeout: per-request timeout, seconds.
            registry: where the locust processes are recorded (``gameday restore`` and
                ``gameday down`` stop those whose runner died).
            expect_workers: workers on other machines (``python -m gameday.load.worker``)
                the master waits for, beyond the *workers* started here; their records
                come through the master, on this machine's clock.
            master_bind: where the master listens for them (host, port).
            workers_wait: how long :meth:`start` waits for them to connect.
        """
        super().__init__(rate=rate, users=users, timeout=timeout)
        self.endpoints = endpoints
        self.workdir = workdir.resolve()
        self.records_dir = self.workdir / "records"
        self.locustfile = locustfile or BUILTIN_LOCUSTFILE
        self.workers = workers
        self.max_seconds = max_seconds
        self.procs: list[subprocess.Popen[bytes]] = []
        self.registry = registry
        self.expect_workers = expect_workers
        self.master_bind = master_bind
        self.workers_wait = workers_wait
        self._master_port: int | None = None
        self._offsets: dict[Path, int] = {}
        self._marks: dict[Path, float | None] = {}
        self.started_at: float | None = None

    def _env(self) -> dict[str, str]:
        host, port = self.endpoints.dns_server
        return {
            **os.environ,
            "GAMEDAY_DNS": f"{host}:{port}",
            "GAMEDAY_FQDN": self.endpoints.fqdn,
            "GAMEDAY_PORT": str(self.endpoints.gateway_port),
            "GAMEDAY_SCHEME": self.endpoints.client.scheme,
            "GAMEDAY_PATH": self.endpoints.client.path,
            "GAMEDAY_HOST_HEADER": self.endpoints.client.host_header or "",
            "GAMEDAY_SERVED_BY": self.endpoints.client.served_by_header or "",
            "GAMEDAY_USER_RATE": str(self.rate / self.users),
            "GAMEDAY_RECORDS": str(self.records_dir),
            "GAMEDAY_TIMEOUT": str(self.timeout),
            # The locustfile quits when its parent changes; read at import time, its own
            # getppid() could already be init's if the runner died while locust was starting.
            "GAMEDAY_RUNNER_PID": str(os.getpid()),
            "PYTHONUNBUFFERED": "1",
        }

    def _argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "locust", "-f", str(self.locustfile), "--headless",
                "-u", str(self.users), "-r", str(max(self.users, 1)), "-t", f"{int(self.max_seconds)}s",
                "--only-summary", "--stop-timeout", "2", "-H", "http://gameday.invalid",
                # locust's own statistics (rewritten every second, flushed every 5 s) for the report
                "--csv", str(self.workdir / "locust"), *extra]

    @property
    def stats_csv(self) -> Path:
        """locust's request statistics (its ``--csv`` output): one row per request name and the total."""
        return self.workdir / "locust_stats.csv"

    def start(self, timeout: float = 30.0) -> None:
        """Start locust and wait until the first requests are recorded.

        Raises:
            LoadError: locust exited or recorded nothing within *timeout* seconds.
        """
        self.records_dir.mkdir(parents=True, exist_ok=True)
        if not self.locustfile.is_file():
            raise LoadError(f"locustfile {self.locustfile} does not exist")
        self.locustfile = self.locustfile.resolve()
        log = (self.workdir / "locust.log").open("ab")
        env = self._env()
        if self.workers <= 0 and self.expect_workers <= 0:
            argvs = [self._argv()]
        else:
            if self.expect_workers > 0:
                bind, port = self.master_bind
                env["GAMEDAY_REMOTE_WORKERS"] = "1"
                with contextlib.suppress(FileNotFoundError):
                    (self.records_dir / "workers.json").unlink()  # a previous run's workers are not ours
            else:
                bind, port = "127.0.0.1", free_port()
                self._master_port = port
            argvs = [self._argv("--master", "--master-bind-host", bind, "--master-bind-port", str(port),
                                "--expect-workers", str(self.workers + self.expect_workers),
                                *(["--expect-workers-max-wait", str(max(1, math.ceil(self.workers_wait)))]
                                  if self.expect_workers > 0 else []))]
            argvs += [[sys.executable, "-m", "locust", "-f", str(self.locustfile), "--worker",
                       "--master-host", "127.0.0.1", "--master-port", str(port)]] * self.workers
        try:
            for i, argv in enumerate(argvs):
                role = "locust" if len(argvs) == 1 and self.expect_workers <= 0 else (
                    "locust-master" if i == 0 else "locust-worker")
                with INTERRUPTS.shielded(f"starting {role}"):  # a started process is always recorded
                    # Own session: a Ctrl-C on the terminal reaches pytest, which stops us in order.
                    proc = spawn(argv, death_signal=signal.SIGKILL, stdout=log, stderr=log, env=env,
                                 start_new_session=True, cwd=self.workdir)
                    self.procs.append(proc)
                    if self.registry is not None:
                        self.registry.add(proc.pid, role, self.workdir)
        finally:
            log.close()
        if self.expect_workers > 0:
            self._wait_for_workers()
        self.started_at = time.monotonic()
        deadline = self.started_at + timeout
        while not self.poll():
            dead = [p for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                why = f"exited with code {dead[0].returncode}" if dead else f"recorded nothing in {timeout:g} s"
                raise LoadError(f"locust {why}; see {self.workdir / 'locust.log'}")
            time.sleep(0.1)

    def _wait_for_workers(self) -> None:
        """Until the master has measured the clocks of :attr:`expect_workers` remote workers.

        Raises:
            LoadError: fewer connected within :attr:`workers_wait` (or the master exited);
                every locust process is stopped and nothing was injected.
        """
        host, port = self.master_bind
        # The master gives up by itself at workers_wait (--expect-workers-max-wait) and then tells
        # the workers that did connect to quit; this deadline only catches a master that hangs.
        deadline = time.monotonic() + self.workers_wait + 10.0
        while (n := len(self.remote_workers())) < self.expect_workers:
            master = self.procs[0]
            if master.poll() is not None or time.monotonic() > deadline:
                why = f"{n} of {self.expect_workers} load workers connected within {self.workers_wait:g} s"
                if master.returncode not in (None, 1):  # 1: it gave up waiting, as told (and told the workers)
                    why = f"the locust master exited with code {master.returncode}; {why}"
                self.stop()
                raise LoadError(
                    f"{why} (--gameday-load-expect-workers {self.expect_workers}, master on {host}:{port}); "
                    f"start each on its load machine with: {WORKER_COMMAND.format(host='HARNESS_HOST', port=port)} "
                    f"- nothing was injected; see {self.workdir / 'locust.log'}")
            time.sleep(0.1)

    def remote_workers(self) -> dict[str, dict[str, object]]:
        """The remote workers whose clocks the master measured: id -> host, pid, offset_s,
        uncertainty_s, rtt_s (``workers.json``, written by the master)."""
        try:
            data = json.loads((self.records_dir / "workers.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        workers = data.get("workers") if isinstance(data, dict) else None
        return workers if isinstance(workers, dict) else {}

    @property
    def clock_uncertainty(self) -> float:
        """How far a remote worker's records may be off the harness's clock, seconds (half the
        shortest round trip of its clock measurement; the largest over the workers; 0 without)."""
        return max((float(str(w.get("uncertainty_s") or 0.0)) for w in self.remote_workers().values()), default=0.0)

    def poll(self) -> list[RequestRec]:
        """Read requests recorded since the last call (also kept in :attr:`records`)."""
        new: list[RequestRec] = []
        for path in sorted(self.records_dir.glob("requests-*.jsonl")):
            off = self._offsets.get(path, 0)
            with path.open("rb") as fh:
                fh.seek(off)
                data = fh.read()
            end = data.rfind(b"\n") + 1
            self._offsets[path] = off + end
            for line in data[:end].splitlines():
                try:
                    d = json.loads(line)
                    if "w" in d and "t" not in d:  # the locustfile's watermark (see complete_until)
                        self._marks[path] = float(d["w"])
                        continue
                    if "d" in d and "t" not in d:  # an arrival dropped: its user had too many in flight
                        self.dropped.append(float(d["d"]))
                        continue
                    self._marks.setdefault(path, None)
                    new.append(RequestRec(t=float(d["t"]), status=int(d["s"]), latency=float(d["l"]),
                                          region=d.get("r"), error=d.get("e"), client=d.get("c")))
                except (ValueError, KeyError, TypeError):
                    continue  # a user locustfile may write other lines; they are not ours
        self.records.extend(new)
        return new

    def complete_until(self) -> float | None:
        """The send time before which every request of every load process is in :attr:`records`
        (the oldest of the processes' last watermarks), or None where a process's file has
        none: a user's locustfile that writes no watermarks. Up to date as of the last
        :meth:`poll`.

        A request is recorded when it completes, up to a DNS and an HTTP timeout after it
        was sent, so "no error in the last second" read from the records alone can be
        errors that are still on their way."""
        marks = list(self._marks.values())
        if not marks or any(m is None for m in marks):
            return None
        return min(m for m in marks if m is not None)

    # -- liveness and achieved load (read by the drill's watcher, from the observer thread) --
    def liveness(self) -> list[ComponentState]:
        """Every locust process, alive or exited (with its exit code); empty once stopped."""
        out = []
        for i, p in enumerate(list(self.procs)):
            name = "locust" if len(self.procs) == 1 and self.expect_workers <= 0 else (
                "locust-master" if i == 0 else f"locust-worker-{i}")
            rc = p.poll()
            detail = "" if rc is None else (
                f"exited with code {rc}" + (f" ({signal.Signals(-rc).name})" if rc < 0 and -rc in _SIGNALS else "")
                + f"; see {self.workdir / 'locust.log'}")
            out.append(ComponentState(name, rc is None, p.pid, LOAD_ROLE, detail))
        return out

    def stop(self) -> None:
        """Stop every locust process (SIGTERM, then SIGKILL after 10 s) and read the rest."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            if self.registry is not None:
                self.registry.discard(p.pid)
        self.procs.clear()
        if self._master_port is not None:
            release([self._master_port])
            self._master_port = None
        if self.records_dir.exists():
            self.poll()

    def __enter__(self) -> LoadRunner:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
