"""The federation profile: one clear error per mistake (file, field, value, expected), no traceback."""

from __future__ import annotations

import copy
import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gameday.errors import ConfigError
from gameday.observers.sources import HttpJsonUtilisation
from gameday.targets.external import ExternalTarget
from gameday.targets.profile import load_profile, parse_profile

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "profiles" / "team-federation.yaml"

GOOD: dict[str, Any] = {
    "name": "team",
    "service": {"fqdn": "app.example.test", "dns": {"server": "127.0.0.1", "port": 5300},
                "load": {"port": 8080, "path": "/", "host": "app.example.test"}},
    "regions": [
        {"name": "a", "gateway": "127.0.1.1", "weight": 50, "capacity_rps": 100,
         "entry_nodes": [{"name": "gateway-a", "http_json": {"url": "http://127.0.1.1:8080/status"}}],
         "faults": {"gateway_down": {"inject": {"argv": ["true"]}, "revert": {"argv": ["true"], "timeout": 5}}}},
        {"name": "b", "gateway": "127.0.2.1", "weight": 50},
    ],
}


def _with(path: str, value: Any) -> dict[str, Any]:
    """GOOD with the value at dotted *path* (``regions.0.weight``) replaced; ``...``: deleted."""
    data = copy.deepcopy(GOOD)
    *parents, last = path.split(".")
    cur: Any = data
    for p in parents:
        cur = cur[int(p)] if p.isdigit() else cur.setdefault(p, {})
    key: Any = int(last) if last.isdigit() else last
    if value is ...:
        del cur[key]
    else:
        cur[key] = value
    return data


def test_a_good_profile_loads_with_what_the_drill_needs(tmp_path: Path) -> None:
    f = tmp_path / "team.yaml"
    f.write_text(yaml.safe_dump(GOOD))
    loaded = load_profile(f)
    p = loaded.profile
    assert p.service.fqdn == "app.example.test."  # the trailing dot is added
    assert [r.name for r in p.regions] == ["a", "b"]
    assert p.region("b").capacity_rps is None  # unknown, not 0
    assert p.host_header == "app.example.test"
    assert p.detection_timing() is None  # the profile states no timing: preflight says unknown
    assert loaded.path == f.absolute() and len(loaded.sha256) == 64
    topo = p.as_topology()
    assert [(r.name, r.weight) for r in topo.regions] == [("a", 50), ("b", 50)]
    assert topo.fqdn == "app.example.test."


CASES = [
    (_with("regions", [GOOD["regions"][0]]), "regions: got 1 item(s), expected at least 2 (a failover drill needs "
     "a region to fail over to)"),
    (_with("regions.1.name", "a"), "regions[1].name: 'a' is used twice; region names must be unique"),
    (_with("regions.1.gateway", "127.0.1.1"), "regions[1].gateway: 127.0.1.1 is also region a's gateway; *"),
    (_with("regions.1.gateway", "gw.example"), "regions.1.gateway: got 'gw.example', expected an IPv4 address*"),
    (_with("regions.0.weight", -5), "regions.0.weight: got -5, expected a finite number > 0 and <= 1000"),
    (_with("regions.0.weight", True), "regions.0.weight: got True, expected a finite number > 0 and <= 1000"),
    (_with("regions.0.capacity_rps", 0), "regions.0.capacity_rps: got 0, expected a finite number > 0*"),
    (_with("regions.0.faults.gateway_down.revert", ...), "regions.0.faults.gateway_down.revert: required field is "
     "missing"),
    (_with("regions.0.faults.gateway_down.inject.timeout", 3600),
     "regions.0.faults.gateway_down.inject.timeout: got 3600, expected a finite number > 0 and <= 600"),
    (_with("regions.0.faults.gateway_down.inject.argv", []),
     "regions.0.faults.gateway_down.inject.argv: got 0 item(s), expected at least 1"),
    (_with("regions.0.faults.gateway_down.inject.argv", "nginx -s stop"),
     "regions.0.faults.gateway_down.inject.argv: got 'nginx -s stop', expected a valid list"),
    (_with("regions.0.faults.gateway_down.inject.argv", ["nginx", 3]),
     "regions.0.faults.gateway_down.inject.argv.1: got 3, expected a valid string"),
    (_with("regions.0.faults.gateway_down.inject", {"shell": True}),
     "regions.0.faults.gateway_down.inject.command: required with shell: true*"),
    (_with("regions.0.faults.gateway_down.inject", {"command": "nginx -s stop"}),
     "regions.0.faults.gateway_down.inject.command: needs shell: true; or give argv*"),
    (_with("regions.0.faults.control_plane_down", {"inject": {"argv": ["true"]}, "revert": {"argv": ["true"]}}),
     "regions[0].faults.control_plane_down: control_plane_down takes no region; put it under the top-level faults"),
    (_with("faults", {"gateway_down": {"inject": {"argv": ["true"]}, "revert": {"argv": ["true"]}}}),
     "faults.gateway_down: gateway_down needs a region; put it under regions[i].faults"),
    (_with("service.dns.port", 70000), "service.dns.port: got 70000, expected an integer >= 1 and <= 65535"),
    (_with("service.dns.server", "dns.example"), "service.dns.server: got 'dns.example', expected an IP address*"),
    (_with("service.fqdn", "bad name!"), "service.fqdn: got 'bad name!', expected a DNS name*"),
    (_with("service.load.path", "work"), "service.load.path: got 'work', expected a URL path starting with /*"),
    (_with("service.load.scheme", "ftp"), "service.load.scheme: got 'ftp', expected 'http' or 'https'"),
    (_with("regions.0.entry_nodes.0.http_json.url", "127.0.1.1:8080/status"),
     "regions.0.entry_nodes.0.http_json.url: got '127.0.1.1:8080/status', expected an http:// or https:// URL*"),
    (_with("control_plane", {"version": {}}),
     "control_plane.version: got none, expected exactly one of http_json, prometheus, metrics"),
    (_with("alarms", [{"log": {"path": "x.log", "node": "proxy-a"}}]),
     "alarms.0.log.regex: give exactly one of regex or json_event_field"),
    (_with("timing", {"fall": 3}), "timing.probe_interval: give probe_interval, probe_timeout and fall together*"),
    (_with("timing", {"dns_ttl": 600}), "timing.dns_ttl: got 600, expected an integer >= 0 and <= 60"),
    (_with("regions.0.faults.gateway_down.takes_region_out", False),
     "regions[0].faults.gateway_down.takes_region_out: gateway_down is a fault gameday knows; its meaning is fixed*"),
    (_with("regions.0.wieght", 5), "regions.0.wieght: unknown field (check the spelling; see "
     "docs/reference/profile.md and examples/profiles/)"),
    (_with("regions.0.utilisation", ["127.0.1.1:9100/load"]),
     "regions.0.utilisation.0.url: got '127.0.1.1:9100/load', expected an http:// or https:// URL*"),
    (_with("regions.0.utilisation", [{"url": "http://127.0.1.1:9100/load", "capacity": ""}]),
     "regions.0.utilisation.0.capacity: *"),
    (_with("regions.0.utilisation", [{"url": "http://127.0.1.1:9100/load", "utilisaton": "x"}]),
     "regions.0.utilisation.0.utilisaton: unknown field*"),
]


@pytest.mark.parametrize(("data", "message"), CASES, ids=[re.sub(r"\W+", "-", m[:40]) for _, m in CASES])
def test_each_mistake_gives_one_clear_error(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    f = tmp_path / "team.yaml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_profile(f)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    # CASES write regions.0.x; messages show regions[0].x
    expected = re.sub(r"(?<=[a-z_])\.(\d+)\b", r"[\1]", message).replace("[", "[[]")
    assert fnmatch.fnmatchcase(lines[0], f"{f}: {expected}"), lines[0]


def test_yaml_problems_name_the_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text("name: a\nname: b\n")
    with pytest.raises(ConfigError, match=r"dup.yaml:2: duplicate key 'name'"):
        load_profile(f)
    with pytest.raises(ConfigError, match="does not exist"):
        load_profile(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        parse_profile(["a"], "list.yaml")


def test_the_documented_profile_is_valid_as_written() -> None:
    """The complete example the how-to shows (it includes the shipped file) loads as written."""
    page = (REPO / "docs" / "howto" / "own-federation.md").read_text(encoding="utf-8")
    assert '--8<-- "examples/profiles/team-federation.yaml"' in page
    p = load_profile(EXAMPLE).profile
    assert len(p.regions) >= 2
    assert all("gateway_down" in r.faults for r in p.regions)
    assert p.control_plane is not None and p.alarms


def test_utilisation_entries_name_their_own_fields_or_take_the_format_s(tmp_path: Path) -> None:
    """A federation whose instances report load under names of their own is described as it
    is; a plain URL keeps the format's names (the reference app's)."""
    data = _with("regions.0.utilisation", [
        "http://127.0.1.1:9100/status",
        {"url": "http://127.0.1.2:9100/stats", "capacity": "limits.rps", "utilisation": "load.share",
         "rejected": None},
    ])
    f = tmp_path / "team.yaml"
    f.write_text(yaml.safe_dump(data))
    target = ExternalTarget(load_profile(f), tmp_path / "work")
    plain, own = target.sources().utilisation["a"]
    assert isinstance(plain, HttpJsonUtilisation) and isinstance(own, HttpJsonUtilisation)
    assert (plain.capacity_path, plain.utilisation_path, plain.rejected_path) == \
        ("capacity_rps", "utilisation", "rejected_total")
    assert (own.url, own.capacity_path, own.utilisation_path, own.rejected_path) == \
        ("http://127.0.1.2:9100/stats", "limits.rps", "load.share", None)
