#!/bin/sh
# A scripted teammate standing in for a coding agent in README's "Ten agents on one
# repository": it reads its task from the prompt on stdin (the row's values it lists,
# `- task: …`) and does it in its worktree.
#   Fix the lint in src/mN.rs                  fn mN () → fn mN()
#   Document the entry point of src/mN.rs      a doc comment above it
#   Add the NAME command with alias -X         src/feature_<row>.rs registering it
# It writes its report to $RUNNER_REPORT.
set -eu
task=$(sed -n 's/^- task: //p' | head -n 1)
file=$(printf '%s\n' "$task" | grep -o 'src/[a-z0-9_]*\.rs' | head -n 1 || true)
case $task in
"Fix the lint in "*)
    sed 's/^fn \(m[0-9]*\) ()/fn \1()/' "$file" > "$file.new" && mv "$file.new" "$file"
    summary="Fixed the spacing of the entry point in $file" ;;
"Document the entry point of "*)
    { echo "/// The module's entry point."; cat "$file"; } > "$file.new" && mv "$file.new" "$file"
    summary="Documented the entry point of $file" ;;
"Add the "*)
    name=$(printf '%s\n' "$task" | sed -n 's/^Add the \([a-z]*\) command.*/\1/p')
    alias=$(printf '%s\n' "$task" | sed -n 's/.*with alias \(-[a-z]\).*/\1/p')
    file="src/feature_$(printf '%s' "$RUNNER_ITEM_ID" | sed 's/^feature-//').rs"
    printf 'command: %s\nalias: %s\n' "$name" "$alias" > "$file"
    summary="Added the $name command ($alias) in $file" ;;
*)
    printf '{"status":"blocked","summary":"","blocker":"unknown task: %s"}' "$task" > "$RUNNER_REPORT"
    exit 0 ;;
esac
printf '{"status":"completed","summary":"%s","files_modified":["%s"]}' "$summary" "$file" > "$RUNNER_REPORT"
