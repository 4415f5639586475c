"""Bad topology files are refused before anything is touched, each with one clear error.

Every case runs pytest in a subprocess the way a user would (``--gameday-topology=bad``)
and checks: exit code 4 (usage error), exactly one ``ERROR: gameday:`` line naming the
file and what was expected, no traceback, a short message, and no reports directory
(so no federation, no ledger, no fault).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gameday.errors import ConfigError
from gameday.model.topology import load_topology, parse_topology
from gameday.runtime.userinput import MAX_FILE_BYTES, load_yaml, shown
from gameday.targets.k8s import files as k8s_files

REPO = Path(__file__).resolve().parents[1]
BASE = (REPO / "clusters" / "local.yaml").read_text()
INI = "[pytest]\naddopts = -p no:locust -p no:cacheprovider\n"


def _edit(old: str, new: str) -> bytes:
    assert old in BASE, old
    return BASE.replace(old, new, 1).encode()


def _bomb() -> bytes:
    # 10 levels of 10 aliases each: 40 lines on disk, 10**10 nodes expanded.
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return ("\n".join(lines) + "\nregions: *l9\n").encode()


CASES: dict[str, tuple[Callable[[], bytes], str]] = {
    "binary": (lambda: b"\x7fELF\x00\x01\x02", "*: NUL byte at byte offset 4 (line 1, column 5): a binary file, "
               "expected a topology file in UTF-8 text"),
    "utf16": (lambda: BASE.encode("utf-16"), "*: starts with a UTF-16 byte-order mark; expected UTF-8 text*"),
    "latin1": (lambda: BASE.replace("owner: platform", "owner: caf\u00e9", 1).encode("latin-1"),
               "*: not UTF-8: byte 0xe9 at byte offset * (line 36, column 36) (invalid continuation byte); "
               "expected a topology file in UTF-8 text (save the file as UTF-8)"),
    "nested": (lambda: b"[" * 20_000 + b"]" * 20_000, "*:1: nested deeper than 32 levels; a topology needs at most 5"),
    "alias_bomb": (_bomb, "*:5: aliases expand to more than 100000 nodes; expected a hand-written topology*"),
    "recursive_alias": (lambda: b"regions: &r [*r]\n", "*:1: an alias refers to a node that contains it*"),
    "duplicate_key": (lambda: _edit("  dns_ttl: 5\n", "  dns_ttl: 5\n  dns_ttl: 7\n"),
                      "*:20: duplicate key 'dns_ttl' (first at line 19); expected each key once*"),
    "too_large": (lambda: BASE.encode() + b"#" * MAX_FILE_BYTES,
                  f"*: * bytes, expected a topology file of at most {MAX_FILE_BYTES} bytes"),
    "empty": (lambda: b"# nothing here\n", "*: is empty, expected a topology (see clusters/local.yaml)"),
    "a_list": (lambda: b"- a\n- b\n", "*: expected a mapping at the top level, got list ['a', 'b']"),
    "control_character": (lambda: _edit("name: local", "name: lo\x07cal"),
                          "*: not valid YAML: line 6, column 9: control character #x0007 is not allowed in YAML"),
    "two_documents": (lambda: BASE.encode() + b"---\nname: again\n", "*: not valid YAML: line 59, column 1: "
                      "but found another document (expected a single document in the stream)"),
    "not_yaml": (lambda: b"regions: [a, b\n", "*: not valid YAML: line 2, column 1: expected ',' or ']'*"),
    "bool_as_int": (lambda: _edit("instances: 2", "instances: true"),
                    "*: regions[0].instances: got True, expected an integer >= 2 and <= 50*"),
    "bool_as_float": (lambda: _edit("weight: 50", "weight: yes"),
                      "*: regions[0].weight: got True, expected a finite number > 0 and <= 1000"),
    "nan": (lambda: _edit("weight: 50", "weight: .nan"),
            "*: regions[0].weight: got nan, expected a finite number > 0 and <= 1000"),
    "infinity": (lambda: _edit("capacity_rps: 40", "capacity_rps: .inf"),
                 "*: regions[0].capacity_rps: got inf, expected a finite number > 0 and <= 1e+06"),
    "one_region": (lambda: BASE.split("  - name: b")[0].replace("fallback: b", "fallback: null").encode(),
                   "*: regions: got 1 item(s), expected at least 2 (a failover drill needs a region to fail over to)"),
    "one_instance": (lambda: _edit("instances: 2", "instances: 1"),
                     "*: regions[0].instances: got 1, expected an integer >= 2 and <= 50 "
                     "(one instance must be able to fail)"),
    "ttl_a_day": (lambda: _edit("dns_ttl: 5", "dns_ttl: 86400"),
                  "*: timing.dns_ttl: got 86400, expected an integer >= 0 and <= 60 (*switchover limit)"),
    "heartbeat_above_timeout": (lambda: _edit("heartbeat_interval: 0.5", "heartbeat_interval: 3"),
                                "*: timing.heartbeat_interval: got 3 s, expected less than region_timeout (2 s)*"),
    "stale_before_a_heartbeat": (lambda: _edit("stale_after: 10.0", "stale_after: 0.5"),
                                 "*: timing.stale_after: got 0.5 s, expected more than heartbeat_interval (0.5 s)*"),
    "layout_unknown": (lambda: _edit("state: durable", "state: durable\n  layout: mesh"),
                       "*: control_plane.layout: got 'mesh', expected 'global' or 'regional'"),
    "layout_not_a_string": (lambda: _edit("state: durable", "state: durable\n  layout: 12"),
                            "*: control_plane.layout: got 12, expected 'global' or 'regional'"),
    "async_without_lag": (lambda: _edit("replication: sync", "replication: async"),
                          "*: state.max_lag: required with replication: async (the stated maximum replication "
                          "lag, s)"),
    "lag_with_sync": (lambda: _edit("replication: sync", "replication: sync\n  max_lag: 0.5"),
                      "*: state.max_lag: only with replication: async (got replication: sync)"),
    "replication_unknown": (lambda: _edit("replication: sync", "replication: semi"),
                            "*: state.replication: got 'semi', expected 'sync', 'async' or 'none'"),
    "negative_lag": (lambda: _edit("replication: sync", "replication: async\n  max_lag: -1"),
                     "*: state.max_lag: got -1, expected a finite number > 0 and <= 600"),
    "huge_value": (lambda: _edit("fallback: b", "fallback: " + "z" * 5000),
                   "*: regions[0].fallback: got 'zzz*...*zzz', expected one of ['a', 'b', 'c']"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_topology_gives_one_clear_error_and_touches_nothing(pytester: pytest.Pytester, case: str) -> None:
    content, message = CASES[case]
    pytester.makeini(INI)
    bad = pytester.path / f"{case}.yaml"
    bad.write_bytes(content())
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest_subprocess(f"--gameday-topology={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    pattern = message.removeprefix("*").replace("[", "[[]")  # fnmatch: "[" opens a class
    result.stderr.fnmatch_lines([f"ERROR: gameday: {bad}{pattern}"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert len(errors[0]) < 400, f"the message is {len(errors[0])} characters long"
    assert not (pytester.path / "reports").exists(), "nothing may be created for a refused topology"


def test_a_directory_is_called_a_directory(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    (pytester.path / "clusters").mkdir()
    pytester.makepyfile("def test_x(drill): raise AssertionError('must not run')")
    result = pytester.runpytest_subprocess("--gameday-topology=clusters")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: gameday: --gameday-topology (command line): got 'clusters', expected an "
                                 "existing topology YAML file: clusters is a directory"])
    with pytest.raises(ConfigError, match="clusters: is a directory, expected a topology file"):
        load_topology(pytester.path / "clusters")


def test_the_shipped_topologies_still_load() -> None:
    assert [r.name for r in load_topology().regions] == ["a", "b", "c"]
    assert load_topology(k8s_files.KIND_TOPOLOGY).contexts is not None


def test_a_utf8_byte_order_mark_is_tolerated(tmp_path: Path) -> None:
    p = tmp_path / "bom.yaml"
    p.write_bytes(codecs.BOM_UTF8 + BASE.encode())
    assert load_topology(p) == load_topology()


def test_merge_keys_may_override_what_they_merge() -> None:
    # `<<` is how YAML shares defaults: overriding a merged key is not a duplicate.
    data = load_yaml("base: &b {weight: 1, instances: 2}\nr: {<<: *b, weight: 3}\n", "m.yaml")
    assert data["r"] == {"weight": 3, "instances": 2}


def test_a_mistyped_quota_names_the_key() -> None:
    data = load_yaml(BASE, "t.yaml")
    data["regions"][0]["quota"] = {"cpu": True}
    with pytest.raises(ConfigError, match=r"^t.yaml: regions\[0\].quota.cpu: got True, expected an integer$"):
        parse_topology(data, "t.yaml")


def test_many_errors_are_cut_after_ten_lines() -> None:
    data = load_yaml(BASE, "t.yaml")
    data["regions"][0]["labels"] = {f"k{i}": i for i in range(500)}
    with pytest.raises(ConfigError) as err:
        parse_topology(data, "t.yaml")
    lines = str(err.value).splitlines()
    assert len(lines) == 11
    assert lines[-1] == "t.yaml: ... and 490 more error(s)"


def test_shown_bounds_the_work_and_the_length() -> None:
    nested: list[object] = []
    for _ in range(10_000):
        nested = [nested] * 10  # would be 10**10000 elements if rendered in full
    assert len(shown(nested)) <= 80
    assert "..." in shown("x" * 10_000) and len(shown("x" * 10_000)) <= 80
    assert shown(3.5) == "3.5"


def test_the_regional_layout_is_refused_where_kind_and_kube_deploy_one_control_plane() -> None:
    data = load_topology(k8s_files.KIND_TOPOLOGY).model_dump()
    data["control_plane"]["layout"] = "regional"
    with pytest.raises(ConfigError, match=r"^k.yaml: control_plane.layout: 'regional' \(set\) runs on the local "
                                          r"target only; .* set control_plane.layout: global$"):
        parse_topology(data, "k.yaml")
    data["control_plane"]["layout"] = "global"
    assert parse_topology(data, "k.yaml").layout == "global"


@pytest.mark.parametrize(("replication", "defect", "message"), [
    ("sync", "6", "defects.slow_promotion: only with state.replication: async"),
    ("async\n  max_lag: 0.5", "-1", "defects.slow_promotion: got -1"),
])
def test_a_slow_promotion_defect_needs_a_store_controller(tmp_path: Path, replication: str, defect: str,
                                                          message: str) -> None:
    def topology(replication: str, defect: str) -> Path:
        path = tmp_path / "t.yaml"
        path.write_bytes(_edit("replication: sync", f"replication: {replication}")
                         + f"\ndefects:\n  slow_promotion: {defect}\n".encode())
        return path

    with pytest.raises(ConfigError, match=re.escape(message)):
        load_topology(topology(replication, defect))
    assert load_topology(topology("async\n  max_lag: 0.5", "6")).defects.slow_promotion == 6.0
