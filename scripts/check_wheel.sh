#!/usr/bin/env bash
# The wheel as users get it: built from this checkout, installed with pip into a fresh venv
# (its dependencies pinned by constraints.txt), and run from a folder outside the checkout, so
# nothing can come from the source tree: the entry point, the packaged rules (vtop/_rules),
# their tests (vtop/_rule_tests), the report schema, the completion scripts.
# scripts/test.sh runs this; it also runs alone: ./scripts/check_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vtop-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== %s\n' "$*"; }
quiet() {  # run pip without its notes on index locations it cannot read (noise in a CI log)
    { "$@" 2>&1 1>&3 | { grep -v '^WARNING: Location .* is ignored' || true; } >&2; } 3>&1
}
fail() { echo "check_wheel: $*" >&2; exit 1; }

step "build the wheel"
quiet "$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WORK/dist" "$ROOT"
WHEEL=$(ls "$WORK"/dist/vtop-*.whl)
echo "$(basename "$WHEEL")"
"$PY" - "$WHEEL" <<'EOF'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["vtop/_rules/memory-ceiling.yaml", "vtop/_rule_tests/memory-ceiling.test.yaml",
        "vtop/report/report-schema.json", "vtop/ui/vtop.tcss"]
missing = [n for n in need if n not in names]
missing += [] if any(n.endswith(".dist-info/licenses/LICENSE") for n in names) else ["LICENSE"]
stray = sorted(n for n in names if n.startswith(("tests/", "docs/", "rules/"))
               or (n.startswith("vtop/_rule_tests/") and n.endswith(".py")))
if missing or stray:
    sys.exit(f"wheel contents: missing {missing}, stray {stray}")
print(f"{len(names)} files: rules, rule tests, schema, LICENSE in; no tests or sources outside vtop/")
EOF

step "install it in a fresh venv"
"$PY" -m venv "$WORK/venv"
quiet "$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check -c "$ROOT/constraints.txt" "$WHEEL"
VTOP="$WORK/venv/bin/vtop"

mkdir "$WORK/elsewhere"
cd "$WORK/elsewhere"  # outside the checkout: no tests/rules, no docs/, no vtop/ to import
unset PYTHONPATH
where=$("$WORK/venv/bin/python" -c 'import vtop; print(vtop.__file__)')
case "$where" in "$WORK/venv/"*) echo "vtop imported from $where" ;; *) fail "vtop imported from $where" ;; esac

step "vtop --version"
"$VTOP" --version

step "vtop --help"
"$VTOP" --help > help.txt
head -3 help.txt
grep -q -- "--ca-cert" help.txt || fail "--help lacks --ca-cert"

step "vtop --demo --once"
"$VTOP" --demo --once > once.json
"$WORK/venv/bin/python" - <<'EOF'
import json
doc = json.load(open("once.json"))
(ep,) = doc["endpoints"]
assert ep["status"] == "ok", ep
rules = sorted({f["rule"] for f in ep["findings"]})
assert rules, "the demo's default scenario names its cause"
print(f"vtop {doc['vtop']}: {ep['url']} {ep['status']}, {ep['polls']} polls, findings {rules}")
EOF

step "vtop rules list"
"$VTOP" rules list
"$VTOP" rules --help | grep -q "export" || fail "vtop rules --help does not list export"

step "vtop rules test"
"$VTOP" rules test -q

step "vtop --schema"
"$VTOP" --schema > schema.json
"$WORK/venv/bin/python" -c 'import json; s = json.load(open("schema.json")); print(s["title"], s["$schema"])'

step "vtop completion bash|zsh|fish"
for shell in bash zsh fish; do
    "$VTOP" completion "$shell" > "vtop.$shell"
    grep -q -- "ca-cert" "vtop.$shell" || fail "the $shell completion lacks --ca-cert"
    echo "$shell: $(wc -l < "vtop.$shell") lines"
done
bash -n vtop.bash

step "the installed wheel works"
