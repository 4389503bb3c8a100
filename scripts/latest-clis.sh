#!/usr/bin/env bash
# The newest agent CLIs against the end-to-end suite, to see an upgrade that breaks a runner
# definition before users do. Not part of the README's test command (it needs the npm
# registry and PyPI, and the versions it finds change from day to day).
#
#   scripts/latest-clis.sh            # every CLI pinned in .ci/run
#   scripts/latest-clis.sh codex pi   # only these
#
# For each CLI pinned in .ci/run (`e2e_npm NAME PACKAGE VERSION BIN`, `e2e_pip ...`) it asks
# the registry for the latest version; when that is newer than the pin, it installs it into
# target/e2e-latest/<name>/, else it takes the pinned install of `.ci/run` (a CLI with
# neither is reported NOT TESTED), and points the suite at it (RUNNER_E2E_<NAME>: a binary
# that does not run fails its tests instead of skipping them). Then it runs
# `cargo test --locked --test e2e` for those CLIs and prints, per CLI, the pinned and latest
# versions and which tests broke. A CLI whose latest version would not install is reported
# (with its install log) and left out. Exit 0: every test passed; 1: some broke or a CLI
# would not install; 2: bad usage or a registry could not be asked.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$PWD/target/e2e-latest"
mapfile -t pins < <(grep -E '^e2e_(npm|pip) ' .ci/run)
if [ ${#pins[@]} -eq 0 ]; then
    echo "latest-clis: no e2e_npm/e2e_pip pins in .ci/run" >&2
    exit 2
fi
wanted=("$@")
known=()
for pin in "${pins[@]}"; do
    read -r _ name _ <<<"$pin"
    known+=("$name")
done
for w in "${wanted[@]}"; do
    if ! printf '%s\n' "${known[@]}" | grep -qx -- "$w"; then
        echo "latest-clis: no CLI named '$w' is pinned in .ci/run (known: ${known[*]})" >&2
        exit 2
    fi
done

mkdir -p "$out"

latest_npm() { npm view "$1" version 2>/dev/null || true; }
latest_pip() {
    { python3 -m pip index versions "$1" 2>/dev/null || true; } |
        sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -n 1
}
# The newer of two versions (sort -V).
newer() { printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1; }

declare -A pinned latest tested
envs=()
filters=()
for pin in "${pins[@]}"; do
    read -r kind name package version bin <<<"$pin"
    if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx -- "$name"; then
        continue
    fi
    pinned[$name]=$version
    case $kind in
    e2e_npm) new=$(latest_npm "$package") ;;
    e2e_pip) new=$(latest_pip "$package") ;;
    esac
    if [ -z "$new" ]; then
        echo "latest-clis: could not ask the registry for $package" >&2
        exit 2
    fi
    latest[$name]=$new
    var="RUNNER_E2E_$(echo "$name" | tr '[:lower:]-' '[:upper:]_')"
    if [ "$(newer "$new" "$version")" = "$version" ]; then
        # The pin is the latest (or newer than what the registry serves): test the pinned
        # install, which must be there.
        case $kind in
        e2e_npm) pinned_bin="target/e2e-$name/node_modules/.bin/$bin" ;;
        e2e_pip) pinned_bin="target/e2e-$name/venv/bin/$bin" ;;
        esac
        if [ ! -x "$pinned_bin" ]; then
            tested[$name]="not installed: run bash .ci/run"
            continue
        fi
        filters+=("$name::")
        envs+=("$var=$PWD/$pinned_bin")
        tested[$name]="$version (the pin)"
        continue
    fi
    dir="$out/$name"
    if [ "$(cat "$dir/installed" 2>/dev/null)" != "$package@$new" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "Installing $package $new into $dir"
        case $kind in
        e2e_npm) path="$dir/node_modules/.bin/$bin" ;;
        e2e_pip) path="$dir/venv/bin/$bin" ;;
        esac
        ok=0
        case $kind in
        e2e_npm)
            npm install --prefix "$dir" --no-audit --no-fund "$package@$new" >"$dir/install.log" 2>&1 &&
                "$path" --version >>"$dir/install.log" 2>&1 && ok=1
            ;;
        e2e_pip)
            python3 -m venv "$dir/venv" >"$dir/install.log" 2>&1 &&
                "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
                    "$package==$new" >>"$dir/install.log" 2>&1 &&
                "$path" --version >>"$dir/install.log" 2>&1 && ok=1
            ;;
        esac
        if [ $ok -eq 0 ]; then
            echo "latest-clis: $package $new would not install or run; see $dir/install.log" >&2
            tested[$name]="install failed"
            continue
        fi
        echo "$package@$new" >"$dir/installed"
    fi
    case $kind in
    e2e_npm) path="$dir/node_modules/.bin/$bin" ;;
    e2e_pip) path="$dir/venv/bin/$bin" ;;
    esac
    filters+=("$name::")
    envs+=("$var=$path")
    tested[$name]=$new
done

log="$out/test.log"
code=0
: >"$log"
if [ ${#filters[@]} -gt 0 ]; then
    echo "Running the end-to-end tests of: ${filters[*]%::}"
    set +e
    env "${envs[@]}" cargo test --locked --test e2e -- "${filters[@]}" >"$log" 2>&1
    code=$?
    set -e
fi

echo
printf '%-10s %-12s %-12s %-22s %s\n' CLI PINNED LATEST TESTED RESULT
status=0
rows=()
for name in "${!pinned[@]}"; do
    passed=$(grep -cE "^test $name::[^ ]+ \.\.\. ok$" "$log" || true)
    failed=$(grep -E "^test $name::[^ ]+ \.\.\. FAILED$" "$log" | sed -E "s/^test $name::([^ ]+) .*/\1/" || true)
    behind=""
    [ "${pinned[$name]}" != "${latest[$name]}" ] && behind=" (pin behind)"
    if [ "${tested[$name]}" = "install failed" ] || [ "${tested[$name]#not installed}" != "${tested[$name]}" ]; then
        result="NOT TESTED"
        status=1
    elif [ -n "$failed" ]; then
        result="BROKE: $(echo "$failed" | tr '\n' ' ')"
        status=1
    else
        result="$passed passed$behind"
    fi
    rows+=("$(printf '%-10s %-12s %-12s %-22s %s' "$name" "${pinned[$name]}" "${latest[$name]}" "${tested[$name]}" "$result")")
done
printf '%s\n' "${rows[@]}" | sort
if [ $code -ne 0 ] && [ $status -eq 0 ]; then
    echo "latest-clis: cargo test failed without a failing e2e test (see $log)" >&2
    status=1
fi
echo "Full log: $log"
exit $status
