#!/usr/bin/env bash
# The report generator and the browser the report tests open it in, in one place:
# .ci/run calls this before `make test`; the tests of tests/report call it when a tool is
# missing, and skip (saying why) only when it cannot be installed.
#
#   install-report-tools.sh --check   exit 0 if both are installed, 1 if not (no output)
#   install-report-tools.sh           install what is missing, quietly; exit 0 when both are
#                                     installed, 2 (with the installer's output) when not
#
# The Allure command line (npm `allure-commandline`: Allure 2, a Java program; Java 17 is
# on the machine) goes into $GAMEDAY_ALLURE_HOME (default: ~/.cache/gameday/allure), kept
# across runs and checkouts; `gameday report` finds it there, on PATH, or at $GAMEDAY_ALLURE.
# The browser is Debian's `chromium` (apt-get, root only).
set -uo pipefail

ALLURE_HOME=${GAMEDAY_ALLURE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/gameday/allure}
ALLURE_VERSION=${GAMEDAY_ALLURE_VERSION:-2.46.1}
ALLURE_BIN=$ALLURE_HOME/node_modules/.bin/allure

allure_ok() { [[ -x $ALLURE_BIN ]] && "$ALLURE_BIN" --version >/dev/null 2>&1; }
chromium_ok() { command -v chromium >/dev/null 2>&1; }

if allure_ok && chromium_ok; then exit 0; fi
[[ ${1:-} == --check ]] && exit 1

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0

if ! allure_ok; then
    if ! command -v npm >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
        echo "cannot install allure-commandline: it needs npm and java on PATH" >&2
        rc=2
    elif ! { mkdir -p "$ALLURE_HOME" &&
             npm install --prefix "$ALLURE_HOME" --no-audit --no-fund --silent \
                 "allure-commandline@$ALLURE_VERSION" >>"$log" 2>&1 && allure_ok; }; then
        echo "npm install allure-commandline@$ALLURE_VERSION into $ALLURE_HOME failed:" >&2
        tail -n 20 "$log" >&2
        rc=2
    fi
fi

if ! chromium_ok; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "not root: cannot install chromium (apt-get needs root)" >&2
        rc=2
    else
        apt_install() {
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                chromium fonts-dejavu-core >>"$log" 2>&1
        }
        # The package lists are refreshed only when the install fails with the ones at hand.
        if ! apt_install; then
            DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$log" 2>&1
            if ! apt_install || ! chromium_ok; then
                echo "apt-get install chromium failed:" >&2
                tail -n 20 "$log" >&2
                rc=2
            fi
        fi
    fi
fi
exit $rc
