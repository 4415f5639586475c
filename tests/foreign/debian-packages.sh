#!/usr/bin/env bash
# The Debian packages the foreign federation (tests/foreign) is built from, in one place:
# .ci/run calls this before `make test`, and the test fixture calls it when they are missing.
#
#   debian-packages.sh --check   exit 0 if all are installed, 1 if not (no output)
#   debian-packages.sh           install what is missing (root only), quietly; exit 0 when
#                                all are installed, 2 (with apt's output) when they cannot be
#
# The packages' own services must not start (they would take port 53 and 80 of the machine):
# a policy-rc.d that answers 101 ("action forbidden") is put in place for the install when
# the machine has none, and removed again.
set -uo pipefail

# GAMEDAY_FOREIGN_PACKAGES (space-separated) replaces the list: the skip path's own test.
read -r -a PACKAGES <<<"${GAMEDAY_FOREIGN_PACKAGES:-nginx pdns-server pdns-backend-bind}"

installed() {
    local status
    for p in "${PACKAGES[@]}"; do
        status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) || return 1
        [[ $status == "install ok installed" ]] || return 1
    done
}

if installed; then exit 0; fi
[[ ${1:-} == --check ]] && exit 1
if [[ $(id -u) -ne 0 ]]; then
    echo "not root: cannot install ${PACKAGES[*]} (apt-get needs root)" >&2
    exit 2
fi

policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
fi
trap '[[ $own_policy == 1 ]] && rm -f "$policy"' EXIT

log=$(mktemp)
apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>"$log" 2>&1
}
# The package lists are refreshed only when the install fails with the ones at hand.
if ! apt_install; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$log" 2>&1
    if ! apt_install; then
        echo "apt-get install ${PACKAGES[*]} failed:" >&2
        tail -n 20 "$log" >&2
        rm -f "$log"
        exit 2
    fi
fi
rm -f "$log"
installed || { echo "apt-get reported success but ${PACKAGES[*]} are not all installed" >&2; exit 2; }
