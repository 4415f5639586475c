"""Secrets never reach the report: the redactor on settings, topologies, profiles and commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gameday.model.topology import load_topology
from gameday.reports.rawdata import settings_json
from gameday.reports.redact import MASK, redact, redact_text, secret_key
from gameday.runtime.settings import Settings


@pytest.mark.parametrize("key", ["token", "password", "db_password", "apiKey", "api-key", "client_secret",
                                 "Authorization", "PGPASSWORD", "githubToken", "aws_secret_access_key",
                                 "credentials", "private_key", "session.cookie"])
def test_keys_that_name_a_secret(key: str) -> None:
    assert secret_key(key)


@pytest.mark.parametrize("key", ["author", "passing", "bypass", "keyboard", "tokenizer_name", "name", "url",
                                 "authority_region", "capacity_rps"])
def test_keys_that_do_not(key: str) -> None:
    assert not secret_key(key)


@pytest.mark.parametrize(("text", "expected"), [
    ("https://alice:s3cret@staging.example.com/api", f"https://{MASK}@staging.example.com/api"),
    ("nats://user:pw@127.0.0.1:4222", f"nats://{MASK}@127.0.0.1:4222"),
    ("https://ghp_abc@github.com/org/repo.git", f"https://{MASK}@github.com/org/repo.git"),
    ("http://h/metrics?token=abc&job=x", f"http://h/metrics?token={MASK}&job=x"),
    ("http://h/x?api_key=k1;mode=y", f"http://h/x?api_key={MASK};mode=y"),
    ('curl -H "Authorization: Bearer eyJhbGci.x.y" http://h/', f'curl -H "Authorization: Bearer {MASK}" http://h/'),
    ("Authorization: Basic dXNlcjpwdw==", f"Authorization: Basic {MASK}"),
    ("psql --password hunter2 -h db", f"psql --password {MASK} -h db"),
    ("PGPASSWORD=hunter2 psql", f"PGPASSWORD={MASK} psql"),
    ("deploy --token='a b c' now", f"deploy --token={MASK} now"),
    ("kubectl --context staging scale deploy/gw --replicas=0",
     "kubectl --context staging scale deploy/gw --replicas=0"),
    ("the token expired at noon", "the token expired at noon"),
    ("http://127.0.0.1:8080/route?region=b", "http://127.0.0.1:8080/route?region=b"),
])
def test_secrets_inside_strings(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_nested_data_keeps_its_shape_and_loses_its_secrets() -> None:
    data = {"dns": {"server": "10.0.0.2:53"}, "auth": {"token": "t0k3n", "user": "ops"},
            "sources": [{"url": "https://ops:pw@prom:9090/api/v1/query?query=up"},
                        {"headers": {"Authorization": "Bearer x"}}],
            "faults": {"gateway_down": {"inject": "ssh ops@gw-b 'systemctl stop gw' --password p4ss"}},
            "password": None, "weight": 50}
    out = redact(data)
    assert out["dns"] == {"server": "10.0.0.2:53"} and out["weight"] == 50
    assert out["auth"] == MASK  # the whole block under a secret key
    assert out["sources"][0]["url"] == f"https://{MASK}@prom:9090/api/v1/query?query=up"
    assert out["sources"][1]["headers"] == {"Authorization": MASK}
    assert out["faults"]["gateway_down"]["inject"] == f"ssh ops@gw-b 'systemctl stop gw' --password {MASK}"
    assert out["password"] is None  # nothing set is shown as nothing set
    assert data["auth"]["token"] == "t0k3n"  # the input is not changed
    text = json.dumps(out)
    for secret in ("t0k3n", "ops:pw", "Bearer x", "p4ss"):
        assert secret not in text


def test_the_settings_attachment_is_redacted(tmp_path: Path) -> None:
    s = Settings(reports=tmp_path / "https:" / "u:pw@host")  # a path with a URL's shape in it
    topo = load_topology()
    data = json.loads(settings_json(s, topo, Path("clusters/local.yaml")))
    assert data["settings"]["seed"] == 0
    assert data["topology_or_profile"]["file"] == "clusters/local.yaml"
    assert [r["name"] for r in data["topology_or_profile"]["content"]["regions"]] == ["a", "b", "c"]
