"""Allure's own files in the results directory: categories, environment, executor."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gameday.reports import allure_attach
from gameday.reports.allure_attach import categorise, environment_properties, executor, write_results_files


@pytest.mark.parametrize(("status", "message", "category"), [
    ("failed", "AssertionError: switchover took 4.21 s ± 0.10 s, limit 2 s: all 4 surviving ...",
     "SLO breaches (a verdict failed)"),
    ("failed", "AssertionError: 1 stale-snapshot alarm(s) during the drill, expected 0:\nproxy-b at t+3.1 s",
     "SLO breaches (a verdict failed)"),
    ("broken", "gameday.errors.TargetUnreachable: steady state not observed within 20 s before injecting "
               "gateway_down b: ...; nothing was injected", "Infrastructure: target unreachable"),
    ("broken", "gameday.errors.ComponentDied: proxy-c (pid 4242) died at t+1.2 s",
     "Infrastructure: target unreachable"),
    ("broken", "gameday.errors.RestoreIncomplete: reverting gateway_down b failed; the ledger keeps it",
     "Infrastructure: restore incomplete"),
    ("broken", "gameday.errors.DrillRefused: refusing gateway_down a: without a the others have 30 req/s",
     "Refused drills"),
    ("passed", "REGRESSION: switchover 3.01 s is +50% against the median 2.00 s of 3 previous runs (limit +50%)",
     "Switchover regressions"),
    ("broken", "httpx.ConnectError: [Errno 111] Connection refused", None),  # Allure's own "test defects"
    ("passed", "", None),
])
def test_each_outcome_lands_in_its_category(status: str, message: str, category: str | None) -> None:
    assert categorise(status, message) == category


def test_categories_are_valid_for_allure() -> None:
    names = [c["name"] for c in allure_attach.CATEGORIES]
    assert len(set(names)) == len(names)
    for c in allure_attach.CATEGORIES:
        assert set(c) <= {"name", "matchedStatuses", "messageRegex", "traceRegex", "flaky"}
        assert set(c["matchedStatuses"]) <= {"failed", "broken", "passed", "skipped", "unknown"}


def test_environment_properties_escape_what_java_properties_would_misread() -> None:
    text = environment_properties({"target": "local", "switchover limit": "180 s", "url": "http://h:1/x=y"})
    assert text.splitlines() == ["target = local", "switchover_limit = 180 s", "url = http\\://h\\:1/x\\=y"]


def test_executor_names_the_ci_run_with_its_urls() -> None:
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "org/gameday", "GITHUB_RUN_ID": "123",
           "GITHUB_RUN_NUMBER": "42", "GITHUB_WORKFLOW": "nightly", "GITHUB_JOB": "drill"}
    ex = executor(env, "20261201-run")
    assert ex == {"name": "GitHub Actions", "type": "github", "url": "https://github.com/org/gameday/actions/runs/123",
                  "buildUrl": "https://github.com/org/gameday/actions/runs/123", "buildOrder": 42,
                  "buildName": "nightly #42, job drill", "reportName": "20261201-run"}
    gitlab = {"GITLAB_CI": "true", "CI": "true", "CI_PIPELINE_URL": "https://gl.example/o/r/-/pipelines/7",
              "CI_JOB_URL": "https://gl.example/o/r/-/jobs/99", "CI_PIPELINE_IID": "7", "CI_JOB_NAME": "gameday",
              "CI_PROJECT_PATH": "o/r"}
    assert executor(gitlab, "r1") == {"name": "GitLab CI", "type": "gitlab", "url": "https://gl.example/o/r/-/pipelines/7",
                                      "buildUrl": "https://gl.example/o/r/-/jobs/99", "buildOrder": 7,
                                      "buildName": "o/r #7, job gameday", "reportName": "r1"}
    jenkins = {"JENKINS_URL": "https://ci.example/", "BUILD_URL": "https://ci.example/job/gd/5/", "BUILD_NUMBER": "5",
               "JOB_NAME": "gd"}
    assert executor(jenkins)["buildUrl"] == "https://ci.example/job/gd/5/" and executor(jenkins)["buildName"] == "gd #5"
    other = executor({"CI": "true", "CI_JOB_URL": "https://ci.example/jobs/3", "CI_JOB_NAME": "nightly"}, "r2")
    assert other["name"] == "CI" and other["buildUrl"] == "https://ci.example/jobs/3"
    assert other["buildName"] == "nightly r2"


def test_executor_off_ci_names_the_host_and_the_user() -> None:
    ex = executor({"USER": "alice"}, "20261201-run")
    assert ex["name"] == f"alice@{socket.gethostname()}" and ex["type"] == "local"
    assert ex["buildName"] == "20261201-run" and "url" not in ex
    # An incomplete GitHub environment is not GitHub Actions: the host and user, not a broken URL.
    assert executor({"GITHUB_REPOSITORY": "org/gameday", "USER": "bob"})["name"].startswith("bob@")


def test_the_files_are_written_into_the_results_directory(tmp_path: Path) -> None:
    d = tmp_path / "allure-results"
    written = write_results_files(d, {"seed": "3"}, {"USER": "alice"}, run="r0")
    assert sorted(p.name for p in written) == ["categories.json", "environment.properties", "executor.json"]
    assert json.loads((d / "executor.json").read_text())["buildName"] == "r0"
    assert json.loads((d / "categories.json").read_text()) == allure_attach.CATEGORIES
    write_results_files(d, {"seed": "3"}, {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r",
                                           "GITHUB_RUN_ID": "9"})
    assert json.loads((d / "executor.json").read_text())["url"] == "https://github.com/o/r/actions/runs/9"
