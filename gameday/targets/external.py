"""The ``external`` target: a federation the harness did not build, known only by its profile.

Whatever runs the federation (VMs, compose, another platform), the harness reaches it over
HTTP and DNS exactly as a client does, observes it through the sources its profile names
and breaks it only with the profile's commands (:mod:`gameday.faults.command`). It never
creates or destroys anything: :meth:`ExternalTarget.up` only checks that the federation is
reachable, :meth:`~ExternalTarget.down` leaves it as it is.

The ledger entry of every injection holds the profile as it was validated (in
:meth:`~ExternalTarget.ref`) and, once the injection ran, the exact revert command (in the
entry's params): ``gameday restore`` after a ``kill -9`` runs that revert, even when the
profile file has changed or gone since (it says so).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import httpx

from gameday.errors import ConfigError, FaultError, FaultUnavailable, TargetError, TargetUnreachable
from gameday.faults import FAULTS, Fault
from gameday.faults.command import CommandFault, CommandRun, CommandSpec
from gameday.interfaces import ClientRoute, Endpoints, RegionInfo
from gameday.model.topology import MAX_DNS_TTL, Timing, Topology
from gameday.observers.kinds import BuildContext, ServiceEntry
from gameday.observers.sources import HttpJsonUtilisation, Sources, StateSource, UdpDns
from gameday.observers.sources.state import READ_BACK_PATIENCE, read_json_field
from gameday.runtime.settings import Settings
from gameday.runtime.userinput import shown
from gameday.targets.profile import Command, LoadedProfile, load_profile, parse_profile
from gameday.verdicts.predict import StatedTiming

log = logging.getLogger(__name__)

REACH_TIMEOUT = 1.0
"""Seconds one reachability probe (a DNS query, a TCP connect) may take: a healthy federation
answers in milliseconds; a second tolerates a loaded machine without stalling ``up()``."""

UP_TIMEOUT = 10.0
"""Seconds :meth:`ExternalTarget.up` keeps trying: a reachable federation on a busy machine
may miss one probe's second; one that stays unreachable for 10 s is not a blip."""

_REVERT_KEY = "revert"
"""Params key of the recorded revert command (in the ledger entry)."""
_REVERTED_KEY = "reverted"
"""Params key set once the revert ran: it runs at most once per injection."""

PROBE_CLIENT = -100
"""The writer-client number of the health check's probe write (its own DNS cache)."""
PROBE_PATIENCE = 1.0
"""Seconds the probe's read-back keeps trying: the health check itself tries again until its
timeout, so one probe need not wait as long as a drill's read-back (READ_BACK_PATIENCE)."""


def command_spec(cmd: Command, cwd: Path) -> CommandSpec:
    """A profile command as plain data, run in the profile's directory *cwd*."""
    return CommandSpec(argv=tuple(cmd.argv or ()), command=cmd.command, shell=cmd.shell, timeout=cmd.timeout,
                       env=dict(cmd.env), cwd=str(cwd))


class ExternalTarget:
    """A :class:`~gameday.interfaces.Target` for a federation described by a profile.

    Args:
        loaded: the validated profile and the file it came from.
        workdir: where the command log (``commands.jsonl``) goes; None: log only.
    """

    name = "external"

    def __init__(self, loaded: LoadedProfile, workdir: Path | None = None) -> None:
        self.loaded = loaded
        self.profile = loaded.profile
        self.workdir = workdir
        self.timing: Timing | None = loaded.profile.detection_timing()
        """Detection timing as the profile states it; None: unknown (preflight says so)."""
        self.runs: list[dict[str, Any]] = []
        """Every command run, in order, with its output (also in ``commands.jsonl``)."""
        self.probe_writes = True
        """With a ``state:`` section, the health check writes one probe record and reads it
        back; False (a dry run, which writes nothing): it only reads one back."""
        self._observed_ttl: int | None = None

    @classmethod
    def from_file(cls, path: str | Path, workdir: Path | None = None) -> ExternalTarget:
        return cls(load_profile(path), workdir)

    @classmethod
    def from_settings(cls, topology: Topology, settings: Settings, workdir: Path) -> ExternalTarget:
        """The registry's factory (:mod:`gameday.targets.registry`): the profile of
        ``--gameday-profile`` (*topology* is derived from it and not needed here).

        Raises:
            ConfigError: no profile was given, or it is invalid.
        """
        if settings.profile is None:
            raise ConfigError("the external target needs a federation profile: --gameday-profile FILE",
                              field="profile")
        target = cls(load_profile(settings.profile), workdir)
        target.probe_writes = not settings.dry_run
        return target

    def faults(self) -> Mapping[str, Fault]:
        """The profile's faults (:class:`~gameday.interfaces.HasFaults`): a built-in name
        keeps its meaning (``gateway_down`` takes its region out) but takes no parameters
        (a command is fixed); a name of the profile's own takes no region out unless its
        ``takes_region_out`` says so."""
        p = self.profile
        out: dict[str, Fault] = {}
        tables = [(None, p.faults)] + [(r.name, r.faults) for r in p.regions]
        for region, table in tables:
            for name, spec in table.items():
                if name in out:
                    continue
                known = FAULTS.get(name)
                if known is not None:
                    out[name] = dataclasses.replace(known, params=())
                else:
                    inject = command_spec(spec.inject, Path()).display
                    out[name] = Fault(name=name, needs_region=region is not None,
                                      takes_region_out=bool(spec.takes_region_out),
                                      description=f"the profile's commands: {inject}, and its revert")
        return out

    # -- ledger --------------------------------------------------------------------------------------
    def ref(self) -> dict[str, Any]:
        """The profile's path and hash, and the profile itself as validated: ``gameday restore``
        must revert with the commands of the injection, whatever the file says by then."""
        return {"profile": str(self.loaded.path), "sha256": self.loaded.sha256,
                "recorded": self.profile.model_dump(mode="json")}

    @classmethod
    def attach(cls, ref: dict[str, Any]) -> ExternalTarget:
        """Re-attach from a ledger reference (for ``gameday restore``).

        The recorded profile is used when the file changed or is gone (a warning says so):
        the revert to run is the one recorded at injection.

        Raises:
            TargetError: the reference holds no usable profile.
        """
        path = Path(str(ref.get("profile", "")))
        recorded = ref.get("recorded")
        try:
            current = load_profile(path, lenient=True)
        except ConfigError as exc:
            current = None
            why = str(exc)
        if current is not None and current.sha256 == ref.get("sha256"):
            return cls(current)
        if not isinstance(recorded, dict):
            raise TargetError(f"cannot re-attach to the external federation of {path}: the ledger holds no recorded "
                              "profile")
        if current is not None:
            why = f"{path} changed since the injection (sha256 {str(ref.get('sha256'))[:12]} -> {current.sha256[:12]})"
        log.warning("%s; using the profile recorded in the ledger at injection, so the revert is exactly the one "
                    "recorded", why)
        try:
            profile = parse_profile(recorded, f"{path} (as recorded in the ledger)", lenient=True)
        except ConfigError as exc:
            raise TargetError(f"cannot re-attach: {exc}") from exc
        return cls(LoadedProfile(profile, path.absolute(), str(ref.get("sha256", ""))))

    def drill_lock_key(self) -> str:
        """The federation's identity (:class:`~gameday.interfaces.SharedFederation`): the name
        its clients resolve at the DNS server they ask, ``federation:app.example.test.@10.0.0.53:53``.
        Every run drilling this federation takes turns, whatever its profile file is called
        or wherever it lies, and so do the kube and kind targets given the same profile."""
        dns = self.profile.service.dns
        server = ipaddress.ip_address(dns.server).compressed
        return f"federation:{self.profile.service.fqdn}@{f'[{server}]' if ':' in server else server}:{dns.port}"

    # -- lifecycle: the federation is someone else's ---------------------------------------------------
    def up(self) -> None:
        """Check the federation is reachable (and, with a ``state:`` section, takes a probe
        write and reads it back) before anything else happens.

        Raises:
            TargetUnreachable: naming every part that is not (the DNS server, a gateway).
        """
        problems = self._problems_for(UP_TIMEOUT)
        if problems:
            raise TargetUnreachable(f"external federation {self.profile.name} ({self.loaded.path}) is not "
                                    f"reachable: {'; '.join(problems)}; nothing was injected")

    def deploy(self) -> None:
        """Nothing to deploy: the federation runs already."""

    def down(self) -> None:
        """Nothing to tear down: the harness did not create the federation."""

    # -- description -----------------------------------------------------------------------------------
    def manifests_dir(self) -> Path | None:
        """The profile's ``manifests`` directory (relative to the profile's file), if it names one."""
        m = self.profile.manifests
        return None if m is None else (self.loaded.base_dir / m).resolve()

    def regions(self) -> list[RegionInfo]:
        return [RegionInfo(r.name, r.weight, r.capacity_rps, r.gateway) for r in self.profile.regions]

    def endpoints(self) -> Endpoints:
        p = self.profile
        return Endpoints(
            dns_server=(p.service.dns.server, p.service.dns.port),
            fqdn=p.service.fqdn,
            gateway_port=p.service.load.port,
            client=ClientRoute(scheme=p.service.load.scheme, path=p.service.load.path, host_header=p.host_header,
                               served_by_header=p.service.served_by_header),
        )

    def sources(self) -> Sources:
        """The observer's sources, exactly as the profile names them."""
        p = self.profile
        base = self.loaded.base_dir
        nodes = tuple(n.source.build(BuildContext(base, node=n.name, region=r.name))
                      for r in p.regions for n in r.entry_nodes)
        dns_source = UdpDns(server=p.service.dns.server, port=p.service.dns.port, fqdn=p.service.fqdn)
        version = p.control_plane.version.build(BuildContext(base)) if p.control_plane is not None else None
        alarms = tuple(a.build(BuildContext(base)) for a in p.alarms)
        utilisation = {r.name: tuple(HttpJsonUtilisation(url=u.url, capacity=u.capacity, utilisation=u.utilisation,
                                                         rejected=u.rejected) for u in r.utilisation)
                       for r in p.regions if r.utilisation}
        state = self.state_source()
        st = p.state
        return Sources(entry_nodes=nodes, dns=dns_source, control_plane=version, alarms=alarms,
                       utilisation=utilisation, state=state, write_rate=st.write_rate if st is not None else 5.0,
                       write_ttl_hint=self.dns_ttl)

    def state_source(self, *, read_patience: float = READ_BACK_PATIENCE) -> StateSource | None:
        """The write path and read-back the profile's ``state:`` describes (None: it has none,
        and the state verdicts are not applicable). The caller closes it."""
        p, st = self.profile, self.profile.state
        if st is None:
            return None
        service = ServiceEntry(dns_server=(p.service.dns.server, p.service.dns.port), fqdn=p.service.fqdn,
                               scheme=p.service.load.scheme, port=p.service.load.port, host=p.host_header)
        source: StateSource = st.source.build(BuildContext(self.loaded.base_dir, service=service,
                                                           write_timeout=st.write_timeout, stated=st.stated(),
                                                           read_patience=read_patience))
        return source

    def state_primary(self) -> str:
        """The region leading the data now, read where the profile's ``state.primary`` says
        (:class:`~gameday.interfaces.HasStatePrimary`).

        Raises:
            TargetError: the profile states no state layer or no ``state.primary``, or the
                answer names no region of the profile.
        """
        st = self.profile.state
        if st is None:
            raise TargetError("the profile states no state layer (state:): no store primary")
        if st.primary is None:
            raise TargetError("the profile states no state.primary (the url and field that name the region leading "
                              "the data): a failover cannot be told from a lost follower")
        where = f"state.primary: {st.primary.url} field {st.primary.field!r}"
        try:
            value = read_json_field(st.primary.url, st.primary.field, st.primary.timeout)
        except (httpx.HTTPError, ValueError) as exc:
            raise TargetError(f"{where}: {type(exc).__name__}: {exc}") from exc
        names = [r.name for r in self.profile.regions]
        if not isinstance(value, str) or value not in names:
            raise TargetError(f"{where}: got {shown(value)}, expected one of the profile's regions {names}")
        return value

    @property
    def dns_ttl(self) -> float:
        """Seconds clients may cache an answer: the profile's ``timing.dns_ttl``, else the TTL
        the DNS server answered with when last checked, else the longest the harness accepts."""
        if self.profile.timing is not None and self.profile.timing.dns_ttl is not None:
            return float(self.profile.timing.dns_ttl)
        return float(self._observed_ttl if self._observed_ttl is not None else MAX_DNS_TTL)

    # -- the prediction's inputs (StatesTiming) --------------------------------------------------------
    def stated_timing(self, *, prefer_observed_ttl: bool = False) -> StatedTiming:
        """The profile's ``timing:`` plus the TTL the DNS server answered with at the last health
        check (:func:`profile_timing`).

        Args:
            prefer_observed_ttl: judge with the observed TTL where it contradicts the stated one.
        """
        return profile_timing(self.loaded, self._observed_ttl, prefer_observed_ttl=prefer_observed_ttl)

    def timing_contradiction(self) -> str | None:
        """The profile's ``timing.dns_ttl`` against the TTL the DNS server answered with at the last
        health check: the file, the field and both values when they differ."""
        t = self.profile.timing
        if t is None or t.dns_ttl is None or self._observed_ttl is None or self._observed_ttl == t.dns_ttl:
            return None
        d = self.profile.service.dns
        return (f"{self.loaded.path}: timing.dns_ttl: states {t.dns_ttl} s, but the DNS server {d.server}:{d.port} "
                f"answers {self.profile.service.fqdn} with TTL {self._observed_ttl} s: clients hold answers for "
                "the TTL they are given")

    # -- health -------------------------------------------------------------------------------------------
    def _dns_problem(self) -> str | None:
        p = self.profile
        server, port = p.service.dns.server, p.service.dns.port
        try:
            resp = dns.query.udp(dns.message.make_query(p.service.fqdn, dns.rdatatype.A), server, port=port,
                                 timeout=REACH_TIMEOUT)
        except (dns.exception.DNSException, OSError) as exc:
            return f"DNS server {server}:{port} does not answer {p.service.fqdn} ({type(exc).__name__}: {exc})"
        addrs = [rr.address for rrset in resp.answer if rrset.rdtype == dns.rdatatype.A for rr in rrset]
        ttls = [rrset.ttl for rrset in resp.answer if rrset.rdtype == dns.rdatatype.A]
        if ttls:
            self._observed_ttl = ttls[0]
        gateways = {r.gateway for r in p.regions}
        if not any(a in gateways for a in addrs):
            return (f"DNS server {server}:{port} answers {p.service.fqdn} with {addrs or 'no address'} "
                    f"(rcode {dns.rcode.to_text(resp.rcode())}), none of them a region's gateway "
                    f"({', '.join(sorted(gateways))})")
        return None

    def _gateway_problems(self) -> list[str]:
        port = self.profile.service.load.port
        out = []
        for r in self.profile.regions:
            try:
                with socket.create_connection((r.gateway, port), timeout=REACH_TIMEOUT):
                    pass
            except OSError as exc:
                out.append(f"gateway of region {r.name} ({r.gateway}:{port}) is unreachable "
                           f"({exc.strerror or type(exc).__name__})")
        return out

    def _problems(self) -> list[str]:
        dns_problem = self._dns_problem()
        problems = ([dns_problem] if dns_problem else []) + self._gateway_problems()
        if not problems:  # the write path is reached through DNS and a gateway: only once they are
            state_problem = self._state_problem()
            problems += [state_problem] if state_problem else []
        return problems

    def _state_problem(self) -> str | None:
        """With a ``state:`` section: one probe write, acknowledged and read back (a dry run only
        reads one back); what went wrong, or None. A drill whose writes cannot be made or read
        back could not say what happened to the data: it is refused before any injection."""
        source = self.state_source(read_patience=PROBE_PATIENCE)
        if source is None:
            return None
        probe = f"gameday-probe-{secrets.token_hex(8)}"
        try:
            problem = None
            if self.probe_writes:
                w = source.write(probe, PROBE_CLIENT)
                if w.outcome != "ack":
                    problem = (f"the write path does not take writes: probe write {probe} {w.outcome} "
                               f"({w.error or 'no reason given'})")
            if problem is None:
                answer = source.lookup([probe])
                if answer.error is not None or answer.failed:
                    problem = (f"the read-back does not answer: reading {probe} back failed "
                               f"({answer.error or 'read failed'})")
                elif self.probe_writes and probe not in answer.found:
                    problem = (f"a probe write was acknowledged and is not read back: {probe} not found at "
                               f"{answer.where or 'the entry DNS answered'}")
            return None if problem is None else f"state: {problem}; {source.describe()}"
        finally:
            source.close()

    def check_health(self, timeout: float) -> None:
        """Every gateway reachable on the load port and the DNS server answering with at
        least one region's gateway, within *timeout* seconds (a reverted gateway may take a
        moment to listen again); with a ``state:`` section, a probe write acknowledged and read
        back through them (a dry run reads one back only): a drill checks this before it
        injects, so one that could not write refuses with nothing injected.

        Raises:
            TargetUnreachable: naming what is not reachable.
        """
        problems = self._problems_for(timeout)
        if problems:
            raise TargetUnreachable(f"external federation {self.profile.name} is not healthy after "
                                    f"{timeout:g} s: {'; '.join(problems)}")

    def _problems_for(self, timeout: float) -> list[str]:
        """What stayed unreachable for *timeout* seconds (empty: all reachable once)."""
        deadline = time.monotonic() + timeout
        while True:
            problems = self._problems()
            if not problems or time.monotonic() >= deadline:
                return problems
            time.sleep(0.2)

    # -- faults --------------------------------------------------------------------------------------------
    def _fault(self, kind: str, region: str | None) -> CommandFault:
        p = self.profile
        if region is not None and region not in {r.name for r in p.regions}:
            raise ConfigError(f"{self.loaded.path}: no region {shown(region)} (regions: "
                              f"{', '.join(r.name for r in p.regions)})")
        spec = p.fault(kind, region)
        if spec is None:
            where = f"regions[{region}].faults" if region is not None else "faults"
            have = sorted(p.fault_names(region))
            raise FaultUnavailable(f"{self.loaded.path}: {where} has no fault {shown(kind)} (it has: "
                              f"{', '.join(have) or 'none'}); add its inject and revert commands to the profile; "
                              "nothing was injected")
        cwd = self.loaded.base_dir
        what = f"{kind} {region or ''}".strip()
        return CommandFault(what, command_spec(spec.inject, cwd), command_spec(spec.revert, cwd), on_run=self._ran)

    def _ran(self, phase: str, what: str, run: CommandRun) -> None:
        entry = {"t": time.time(), "fault": what, "phase": phase, **run.as_dict()}
        self.runs.append(entry)
        if self.workdir is not None:
            import json  # noqa: PLC0415  (only here: the command log)

            self.workdir.mkdir(parents=True, exist_ok=True)
            with (self.workdir / "commands.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")

    @staticmethod
    def _own_params(kind: str, params: dict[str, Any]) -> None:
        extra = sorted(set(params) - {_REVERT_KEY, _REVERTED_KEY})
        if extra:
            raise ConfigError(f"fault {kind}: command faults take no parameters, got {shown(extra)}; "
                              "nothing was injected")

    def plan_fault(self, kind: str, region: str | None, params: dict[str, Any]) -> tuple[str, str]:
        """The commands :meth:`inject` and :meth:`revert` would run, running none (dry run)."""
        self._own_params(kind, params)
        f = self._fault(kind, region)
        return f"run {f.inject_cmd.describe()}", f"run {f.revert_cmd.describe()}"

    def inject(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        """Run the fault's inject command; the revert command is recorded in *params* first.

        Raises:
            ConfigError: the profile has no such fault, or parameters were given (nothing run).
            FaultError: the command failed; its revert was run anyway (see
                :meth:`CommandFault.inject`).
        """
        self._own_params(kind, params)
        fault = self._fault(kind, region)
        params[_REVERT_KEY] = fault.revert_cmd.to_json()
        params.pop(_REVERTED_KEY, None)
        try:
            fault.inject()
        except FaultError:
            if len(fault.runs) > 1 and fault.runs[-1].ok:
                params[_REVERTED_KEY] = True  # undone already: `gameday restore` need not run it again
            raise

    def revert(self, kind: str, region: str | None, params: dict[str, Any]) -> None:
        """Run the revert command recorded at injection (the profile's, if none was recorded),
        at most once per injection.

        Raises:
            RestoreIncomplete: the command failed; the message has the command and its output.
        """
        if params.get(_REVERTED_KEY) is True:
            return
        if _REVERT_KEY not in params and region in (None, *(r.name for r in self.profile.regions)) \
                and self.profile.fault(kind, region) is None:
            # inject refuses such a fault before running anything: there is nothing to undo
            log.info("%s %s: not a fault of %s, so never injected; nothing to revert", kind, region or "",
                     self.loaded.path)
            return
        fault = self._fault(kind, region) if _REVERT_KEY not in params else None
        if fault is None:
            try:
                spec = CommandSpec.from_json(params[_REVERT_KEY])
            except (TypeError, ValueError, AttributeError) as exc:
                raise FaultError(f"reverting {kind} {region or ''}: the recorded revert command is unreadable "
                                 f"({exc})") from exc
            what = f"{kind} {region or ''}".strip()
            fault = CommandFault(what, spec, spec, on_run=self._ran)
        fault.revert()
        params[_REVERTED_KEY] = True

def profile_timing(loaded: LoadedProfile, observed_ttl: float | None = None, *,
                   prefer_observed_ttl: bool = False) -> StatedTiming:
    """A profile's ``timing:`` as the prediction's inputs, with the TTL the DNS server answered
    with (*observed_ttl*, None: not yet seen). The DNS server acts on its own health checks
    (``timing`` describes them): its propagation to the answers is ``timing.gslb_delay``, or 0
    (at once) where not stated; the entry nodes' is ``timing.propagation`` or unknown.

    Args:
        prefer_observed_ttl: judge with the observed TTL where it contradicts the stated one.
    """
    t = loaded.profile.timing
    source = f"profile {loaded.path.name}"
    stated = t.dns_ttl if t is not None else None
    observed = observed_ttl
    if observed is not None and (stated is None or prefer_observed_ttl or observed == stated):
        ttl: float | None = float(observed)
        ttl_from = ("observed in the DNS server's answers" if stated is None or stated != observed
                    else "timing.dns_ttl, as the DNS server answers")
    else:
        ttl, ttl_from = (float(stated), "timing.dns_ttl (not yet observed)") if stated is not None else (None, "")
    propagation = t.propagation if t is not None else None
    return StatedTiming(
        source=source, probe_interval=t.probe_interval if t else None, probe_timeout=t.probe_timeout if t else None,
        fall=t.fall if t else None, dns_ttl=ttl, dns_ttl_from=ttl_from,
        gslb_propagation=t.gslb_delay if t is not None and t.gslb_delay is not None else 0.0,
        gslb_propagation_from=(f"timing.gslb_delay: the DNS server answers up to {t.gslb_delay:g} s after deciding"
                               if t is not None and t.gslb_delay is not None else "timing.gslb_delay not stated: "
                               "the DNS server is taken to answer from its health decisions at once"),
        entry_propagation=propagation, entry_propagation_from="timing.propagation" if propagation is not None
        else "")
