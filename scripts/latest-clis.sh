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
# target/e2e-latest/<name>/ and points the suite at it (RUNNER_E2E_<NAME>). Then it runs
# `cargo test --locked --test e2e` for those CLIs and prints, per CLI, the pinned and latest
# versions and which tests broke. Exit 0: every test passed; 1: some broke; 2: bad usage or a
# registry could not be asked.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$PWD/target/e2e-latest"
mkdir -p "$out"
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

latest_npm() { npm view "$1" version 2>/dev/null; }
latest_pip() {
    python3 -m pip index versions "$1" 2>/dev/null | sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -n 1
}

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
    filters+=("$name::")
    var="RUNNER_E2E_$(echo "$name" | tr '[:lower:]-' '[:upper:]_')"
    if [ "$new" = "$version" ]; then
        tested[$name]="$version (the pin)"
        continue
    fi
    dir="$out/$name"
    if [ "$(cat "$dir/installed" 2>/dev/null)" != "$package@$new" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "Installing $package $new into $dir"
        case $kind in
        e2e_npm)
            npm install --prefix "$dir" --no-audit --no-fund "$package@$new" >"$dir/install.log" 2>&1
            path="$dir/node_modules/.bin/$bin"
            ;;
        e2e_pip)
            { python3 -m venv "$dir/venv" &&
                "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$package==$new"; } \
                >"$dir/install.log" 2>&1
            path="$dir/venv/bin/$bin"
            ;;
        esac
        echo "$package@$new" >"$dir/installed"
    fi
    case $kind in
    e2e_npm) path="$dir/node_modules/.bin/$bin" ;;
    e2e_pip) path="$dir/venv/bin/$bin" ;;
    esac
    envs+=("$var=$path")
    tested[$name]=$new
done

log="$out/test.log"
echo "Running the end-to-end tests of: ${!pinned[*]}"
set +e
env "${envs[@]}" cargo test --locked --test e2e -- "${filters[@]}" >"$log" 2>&1
code=$?
set -e

echo
printf '%-10s %-12s %-12s %-22s %s\n' CLI PINNED LATEST TESTED RESULT
status=0
rows=()
for name in "${!pinned[@]}"; do
    passed=$(grep -cE "^test $name::[^ ]+ \.\.\. ok$" "$log" || true)
    failed=$(grep -E "^test $name::[^ ]+ \.\.\. FAILED$" "$log" | sed -E "s/^test $name::([^ ]+) .*/\1/" || true)
    behind=""
    [ "${pinned[$name]}" != "${latest[$name]}" ] && behind=" (pin behind)"
    if [ -n "$failed" ]; then
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
