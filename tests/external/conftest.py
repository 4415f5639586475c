"""Fixtures of the external-target tests: the reference app, described by a profile.

:func:`reference_profile` writes the profile a team would write for the reference federation
if they had not built it: its gateways' and proxies' ``/status`` JSON, its GSLB for DNS, its
control plane's ``/status`` version, its proxies' log files for alarms, and each region's
``gateway_down`` as signals to the gateway's pid (``kill -STOP`` / ``kill -CONT``: the
gateway hangs, as a host that stops answering does). Nothing in it imports gameday: the
harness sees the federation only through the profile.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday.model.topology import load_topology
from gameday.targets.local.federation import LocalFederation

_POST = ("import pathlib, sys, urllib.request; token = pathlib.Path(sys.argv[3]).read_text().strip(); "
         "urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={"
         "'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token}), timeout=5).read()")
"""A curl-less POST of a JSON body (``python -c _POST URL BODY TOKEN_FILE``): the reference app's
admin hook, signed with the run's token read from its file (the command line names the file only)."""


def gateway_down(fed: LocalFederation, region: str, how: str) -> dict[str, Any]:
    """The profile's ``gateway_down`` of *region*: ``signal`` freezes the gateway (SIGSTOP /
    SIGCONT of its pid, a host that stops answering); ``readyz`` makes its health check fail
    (``POST /admin/fault {"readyz": "fail"}`` / ``{"readyz": "ok"}``), which the GSLB and the
    region agent see at once, as they see a stopped gateway's refused connections."""
    if how == "signal":
        pid = str(fed.components[f"gateway-{region}"].pid)
        return {"inject": {"argv": ["kill", "-STOP", pid], "timeout": 5},
                "revert": {"argv": ["kill", "-CONT", pid], "timeout": 5}}
    url, token_file = fed.admin_endpoint(f"gateway-{region}").url + "/admin/fault", str(fed.admin_token_file)
    return {"inject": {"argv": [sys.executable, "-c", _POST, url, '{"readyz": "fail"}', token_file], "timeout": 10},
            "revert": {"argv": [sys.executable, "-c", _POST, url, '{"readyz": "ok"}', token_file], "timeout": 10}}


def reference_profile(fed: LocalFederation, *, faults: dict[str, dict[str, Any]] | None = None,
                      region_faults: dict[str, dict[str, dict[str, Any]]] | None = None,
                      gateway_down_by: str = "readyz") -> dict[str, Any]:
    """The profile of the running reference federation *fed*.

    Args:
        faults: region-less faults to add (name -> {inject, revert}).
        region_faults: region -> extra faults (name -> {inject, revert}); each region has
            ``gateway_down`` (see :func:`gateway_down`) unless replaced here.
        gateway_down_by: ``readyz`` or ``signal``.
    """
    s = fed.spec
    t = fed.topology  # the harness's topology (the spec carries only the app's view of it)
    regions = []
    for r in s.regions:
        region_fault = {"gateway_down": gateway_down(fed, r.name, gateway_down_by)}
        region_fault.update((region_faults or {}).get(r.name, {}))
        regions.append({
            "name": r.name,
            "gateway": r.gateway.host,
            "weight": r.weight,
            "capacity_rps": sum(i.capacity_rps for i in r.instances),
            "entry_nodes": [
                {"name": f"{role}-{r.name}",
                 "http_json": {"url": f"{getattr(r, role).url}/status", "version": "version",
                               "routable": "routable_regions", "stale": "stale"}}
                for role in ("gateway", "proxy")],
            "utilisation": [f"{i.endpoint.url}/status" for i in r.instances],
            "faults": region_fault,
        })
    return {
        "name": f"reference-{s.run_id}",
        "service": {
            "fqdn": t.fqdn,
            "dns": {"server": s.gslb_dns.host, "port": s.gslb_dns.port},
            "load": {"scheme": "http", "port": s.gateway_port, "path": "/work"},
            "served_by_header": "X-Served-By",
        },
        "regions": regions,
        "control_plane": {"version": {"http_json": {"url": f"{s.control_plane.url}/status", "field": "version"}}},
        "alarms": [{"log": {"path": str(fed.logdir / f"proxy-{r.name}.log"), "node": f"proxy-{r.name}",
                            "json_event_field": "event", "time_field": "mono", "detail_field": "reason"}}
                   for r in s.regions],
        "faults": faults or {},
        "timing": {"probe_interval": t.timing.probe_interval, "probe_timeout": t.timing.probe_timeout,
                   "fall": t.timing.fall, "rise": t.timing.rise, "dns_ttl": t.timing.dns_ttl,
                   "propagation": t.control_plane.propagation},
        "load": {"users": t.load.users, "rate": t.load.rate, "margin": t.load.margin},
    }


def write_profile(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def mark_window_profile(fed: LocalFederation, directory: Path) -> tuple[Path, Path]:
    """A profile of *fed* with one extra, region-less fault ``mark_window`` that changes nothing
    but appends ``inject`` and ``revert`` to a file: ``(the profile, that file)``."""
    events = directory / "windows.log"
    data = reference_profile(fed, faults={"mark_window": {
        "inject": {"argv": ["sh", "-c", f"echo inject >> {events}"], "timeout": 5},
        "revert": {"argv": ["sh", "-c", f"echo revert >> {events}"], "timeout": 5}}})
    return write_profile(directory / "profile.yaml", data), events


@pytest.fixture(scope="module")
def reference_federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFederation]:
    """The reference app's local federation of the default topology, running for the module."""
    fed = LocalFederation.from_topology(load_topology(), tmp_path_factory.mktemp("reference"))
    fed.start()
    try:
        fed.wait_ready(30)
        yield fed
    finally:
        fed.stop()


@pytest.fixture
def pytester_ini(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester whose runs load gameday without locust's own plugin (as the project does)."""
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    return pytester
