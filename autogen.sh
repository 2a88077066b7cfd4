#!/bin/sh
# autogen.sh — bootstrap the build system.
#
#   ./autogen.sh           run autoreconf (needs autoconf, automake, libtool, pkg-config)
#   ./autogen.sh --deps    first install, as root with apt, every Debian package that the
#                          build, the tests, the demo and the benchmarks need (only what is
#                          missing, saying what), then run autoreconf.
#
# The package list lives in one place: .ci/debian-packages (one name per line, '#' comments).
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"

if [ "${1:-}" = "--deps" ]; then
    list="$top/.ci/debian-packages"
    want=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
    missing=""
    for p in $want; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing="$missing $p"
        fi
    done
    if [ -n "$missing" ]; then
        echo "autogen.sh: installing missing Debian packages:$missing"
        if [ "$(id -u)" -ne 0 ]; then
            echo "autogen.sh: --deps must run as root (it uses apt-get)" >&2
            exit 1
        fi
        export DEBIAN_FRONTEND=noninteractive
        # Packages such as nginx and apache2 start their stock services on install; the
        # project starts its own servers with generated configs, so keep those off.
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
            chmod 755 /usr/sbin/policy-rc.d
            trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        fi
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing
    else
        echo "autogen.sh: all Debian packages from .ci/debian-packages are present"
    fi
    # Test clients from npm, pinned by their lock files: the browser driver (the panel's
    # tests) and PostgREST's JavaScript client (the data API's).
    for d in browser postgrest; do
        if [ -f "$top/tests/$d/package.json" ] && [ ! -d "$top/tests/$d/node_modules" ]; then
            echo "autogen.sh: installing the $d test client (npm ci in tests/$d)"
            (cd "$top/tests/$d" && npm ci --no-audit --no-fund --silent)
        fi
    done
fi

autoreconf -fi
echo "autogen.sh: now run ./configure"
