"""Source kinds are a registry: a conftest adds one, a profile names it, the drill observes through it.

The unit tests register a kind in this process and undo it; the drill test writes a conftest
that registers a kind of its own (a version read from the reference control plane's JSON,
every reading appended to a file) and runs the headline drill through the ``external``
target with a profile that names it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gameday.errors import ConfigError
from gameday.observers.kinds import SOURCE_KINDS, BuildContext, SourceKind, StrictModel
from gameday.observers.sources import HttpClient, HttpJsonVersion
from gameday.targets.external import ExternalTarget
from gameday.targets.local.federation import LocalFederation
from gameday.targets.profile import LoadedProfile, parse_profile
from tests.external.conftest import reference_profile, write_profile
from tests.external.test_reference_app import HEADLINE, SEED, _figures


class FileVersionSpec(StrictModel):
    path: str
    """A file holding the control plane's version as its only text."""


class FileVersion:
    """A version source a team might write: the version as a file's text."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def read(self, http: HttpClient) -> int | None:
        try:
            return int(self.path.read_text())
        except (OSError, ValueError):
            return None

    def describe(self) -> str:
        return f"the text of {self.path}"


@pytest.fixture
def file_kind() -> Iterator[SourceKind]:
    kind = SourceKind(role="version", name="version_file", spec=FileVersionSpec,
                      build=lambda spec, ctx: FileVersion(ctx.base_dir / spec.path),
                      description="the version as a file's text")
    SOURCE_KINDS.add(kind)
    try:
        yield kind
    finally:
        SOURCE_KINDS.remove("version", "version_file")


def _profile(version: dict[str, Any]) -> dict[str, Any]:
    node = {"http_json": {"url": "http://127.0.1.1:8080/status"}}
    return {"name": "team", "service": {"fqdn": "app.team.test", "dns": {"server": "127.0.1.53", "port": 5353},
                                        "load": {"port": 8080}},
            "regions": [{"name": r, "gateway": f"127.0.{i}.1", "weight": 1,
                         "entry_nodes": [{"name": f"gateway-{r}", **node}]} for i, r in enumerate("ab", 1)],
            "control_plane": {"version": version}}


def test_a_registered_kind_is_validated_built_and_dumped_as_written(file_kind: SourceKind, tmp_path: Path) -> None:
    (tmp_path / "v").write_text("41")
    profile = parse_profile(_profile({"version_file": {"path": "v"}}))
    assert profile.control_plane is not None
    source = profile.control_plane.version.build(BuildContext(tmp_path))
    assert isinstance(source, FileVersion) and source.path == tmp_path / "v"
    dumped = profile.model_dump(mode="json")
    assert dumped["control_plane"]["version"] == {"version_file": {"path": "v"}}
    assert dumped["regions"][0]["entry_nodes"][0] == {"name": "gateway-a", "http_json": {
        "url": "http://127.0.1.1:8080/status", "version": "version", "routable": "routable_regions", "stale": "stale"}}
    assert parse_profile(dumped) == profile, "a dumped profile reads back the same"


def test_its_fields_are_checked_with_the_field_named(file_kind: SourceKind) -> None:
    with pytest.raises(ConfigError, match=r"team.yaml: control_plane.version.version_file.path: .*required"):
        parse_profile(_profile({"version_file": {}}), "team.yaml")
    with pytest.raises(ConfigError, match=r"team.yaml: control_plane.version.version_file.colour: unknown field"):
        parse_profile(_profile({"version_file": {"path": "v", "colour": "red"}}), "team.yaml")


def test_an_unknown_kind_names_the_known_ones_and_restore_keeps_it_as_written() -> None:
    with pytest.raises(ConfigError, match=r"control_plane.version: got 'version_file', expected exactly one of "
                                          r"http_json, prometheus, metrics \(a source kind a conftest or plugin"):
        parse_profile(_profile({"version_file": {"path": "v"}}), "team.yaml")
    data = _profile({"http_json": {"url": "http://127.0.0.1:1/status"}})
    data["regions"][0]["entry_nodes"] = [{"name": "gateway-a", "k8gb": {"url": "http://x/"}}]
    with pytest.raises(ConfigError, match=r"regions\[0\].entry_nodes\[0\]: got 'k8gb', expected exactly one of "
                                          r"http_json \("):
        parse_profile(data, "team.yaml")
    lenient = parse_profile(_profile({"version_file": {"path": "v"}}), lenient=True)
    assert lenient.control_plane is not None and lenient.control_plane.version.kind is None
    assert lenient.model_dump(mode="json")["control_plane"]["version"] == {"version_file": {"path": "v"}}
    with pytest.raises(ConfigError, match="source kind 'version_file' is not registered in this process"):
        lenient.control_plane.version.build(BuildContext(Path()))


def test_a_builder_that_returns_no_source_is_named(tmp_path: Path) -> None:
    class Spec(BaseModel):
        url: str

    SOURCE_KINDS.add(SourceKind(role="version", name="broken", spec=Spec, build=lambda spec, ctx: spec.url,
                                description="returns a string"))
    try:
        profile = parse_profile(_profile({"broken": {"url": "http://127.0.0.1:1/"}}))
        assert profile.control_plane is not None
        with pytest.raises(ConfigError, match=r"source kind 'broken' \(version\) built str, expected a VersionSource"):
            profile.control_plane.version.build(BuildContext(tmp_path))
    finally:
        SOURCE_KINDS.remove("version", "broken")


def test_two_plugins_cannot_take_one_name(file_kind: SourceKind) -> None:
    with pytest.raises(ConfigError, match="already registered"):
        SOURCE_KINDS.add(file_kind)


def test_the_external_target_observes_through_the_kinds(file_kind: SourceKind, tmp_path: Path) -> None:
    data = _profile({"version_file": {"path": "v"}})
    data["alarms"] = [{"log": {"path": "proxy.log", "node": "proxy-a", "regex": "stale"}}]
    target = ExternalTarget(LoadedProfile(parse_profile(data), tmp_path / "team.yaml", ""))
    sources = target.sources()
    assert isinstance(sources.control_plane, FileVersion) and sources.control_plane.path == tmp_path / "v"
    assert [n.name for n in sources.entry_nodes] == ["gateway-a", "gateway-b"]
    assert [a.describe() for a in sources.alarms] == [sources.alarms[0].describe()]
    assert str(tmp_path / "proxy.log") in sources.alarms[0].describe()
    http = parse_profile(_profile({"http_json": {"url": "http://127.0.0.1:9/status"}}))
    version = ExternalTarget(LoadedProfile(http, tmp_path / "t.yaml", "")).sources().control_plane
    assert isinstance(version, HttpJsonVersion) and version.url == "http://127.0.0.1:9/status"


CONFTEST = '''
import json
from pathlib import Path

import httpx

from gameday.observers.kinds import SOURCE_KINDS, SourceKind, StrictModel


class RecordedVersionSpec(StrictModel):
    url: str
    record: str


class RecordedVersion:
    """The control plane's version from its JSON, each reading appended to a file."""

    def __init__(self, url, record):
        self.url, self.record = url, Path(record)

    async def read(self, http):
        try:
            r = await http.get(self.url, timeout=1.0) if isinstance(http, httpx.AsyncClient) else None
            if r is None:
                async with http.get(self.url) as resp:
                    body = await resp.json(content_type=None)
            else:
                body = r.json()
            version = int(body["version"])
        except Exception:
            return None
        with self.record.open("a") as f:
            f.write(json.dumps(version) + "\\n")
        return version

    def describe(self):
        return f"recorded version of {self.url}"


SOURCE_KINDS.add(SourceKind(role="version", name="recorded", spec=RecordedVersionSpec,
                            build=lambda spec, ctx: RecordedVersion(spec.url, ctx.base_dir / spec.record),
                            description="the version, each reading recorded"))
'''


@pytest.mark.slow
def test_a_conftest_kind_named_by_a_profile_feeds_the_drills_version_verdict(
        pytester: pytest.Pytester, reference_federation: LocalFederation, tmp_path: Path) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:locust -p no:cacheprovider\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_outage=HEADLINE.read_text())  # the team's copy of the headline drill
    data = reference_profile(reference_federation)
    url = data["control_plane"]["version"]["http_json"]["url"]
    data["control_plane"]["version"] = {"recorded": {"url": url, "record": "versions.jsonl"}}
    profile = write_profile(tmp_path / "profile.yaml", data)
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess("test_outage.py", f"--gameday-seed={SEED}", f"--gameday-reports={reports}",
                                           "--gameday-recovery-window=3", "--gameday-target=external",
                                           f"--gameday-profile={profile}", timeout=240)
    result.assert_outcomes(passed=1)
    versions = [json.loads(line) for line in (tmp_path / "versions.jsonl").read_text().splitlines()]
    assert len(versions) >= 10, "the observer polled the conftest's source"
    assert versions == sorted(versions) and versions[-1] >= versions[0] + 2, \
        "the fault and the restore each raised the version, as the verdict saw through the source"
    figures = _figures(reports)
    assert figures["versions"]["passed"] is True, figures["versions"]
    assert "versions" not in figures["not_applicable"]
