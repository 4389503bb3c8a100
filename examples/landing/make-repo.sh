#!/bin/sh
# The repository of README's "Ten agents on one repository, landing through the queue": seven
# modules, a test script, and this folder's batch (tasks.csv, BATCH.md, the scripted teammate
# agent.sh) beside them, untracked and ignored so that `--merge` finds a clean tree.
# Usage: sh examples/landing/make-repo.sh DIR
set -eu
dir=${1:?usage: make-repo.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir/src"
cd "$dir"
git init -q -b main
for n in 1 2 3 4 5 6 7; do
    printf 'fn m%s () {}\n' "$n" > "src/m$n.rs"
done
cat > test.sh <<'TESTS'
#!/bin/sh
# The project's tests: no two commands share an alias.
dups=$(cat src/feature_*.rs 2>/dev/null | sed -n 's/^alias: //p' | sort | uniq -d)
if [ -n "$dups" ]; then
    echo "test cli::aliases_are_unique ... FAILED: alias $dups is taken twice"
    exit 101
fi
echo "test result: ok"
TESTS
printf '*.runner/\nworkers-output.csv\n' > .gitignore
git add -A
git -c user.name=you -c user.email=you@example.com commit -q -m "a small project"
cp "$here/tasks.csv" "$here/BATCH.md" "$here/agent.sh" .
printf 'tasks.csv\nBATCH.md\nagent.sh\n' >> .git/info/exclude
