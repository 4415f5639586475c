# The two commands of the README. Both set everything up on a fresh machine.
#   make drill   run a real game day on the embedded local federation and print verdicts
#   make test    lint, type-check and run the tests
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: drill up test lint bench restore clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

drill: $(STAMP)
	$(VENV)/bin/gameday drill

up: $(STAMP)
	$(VENV)/bin/gameday up

restore: $(STAMP)
	$(VENV)/bin/gameday restore

lint: $(STAMP)
	$(VENV)/bin/ruff check gameday tests suites bench conftest.py
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The plugin's own tests and the suites run in one session on both cores: each worker has
# its own session federation, which the suite tests on that worker share (as a user's run
# does); tests that start federations of their own do so on free ports. Tests pinned with
# xdist_group (the wheel install, the foreign federation) stay on one worker.
test: lint
	$(PY) -m pytest -n 2 --dist loadgroup tests suites --junitxml=reports/junit.xml $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf reports/runs reports/.gameday reports/allure-results reports/*.xml
