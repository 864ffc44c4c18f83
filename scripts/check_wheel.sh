#!/usr/bin/env bash
# The wheel as users get it: built from this checkout, installed with pip into a fresh venv
# (its dependencies pinned by constraints.txt), and run from a folder outside the checkout, so
# nothing can come from the source tree: the entry point, the packaged rules (vtop/_rules),
# their tests (vtop/_rule_tests), the report schema, the example traces (vtop/_traces), the
# completion scripts, the manual page (`man vtop`, share/man/man1/vtop.1), the browser view's
# page (textual-serve's, `--web`); and a newcomer's first mistakes (a malformed URL, a dead
# port) are one line and exit 3 at once.
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
PROBLEMS=()
problem() {  # a check that failed; the rest still run, and the script fails at the end
    PROBLEMS+=("$*")
    echo "check_wheel: FAILED: $*" >&2
}

step "build the wheel"
quiet "$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WORK/dist" "$ROOT"
WHEEL=$(ls "$WORK"/dist/vtop-*.whl)
echo "$(basename "$WHEEL")"
"$PY" - "$WHEEL" <<'EOF'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["vtop/_rules/memory-ceiling.yaml", "vtop/_rule_tests/memory-ceiling.test.yaml",
        "vtop/report/report-schema.json", "vtop/ui/vtop.tcss", "vtop/_traces/memory-ceiling.vtrace"]
missing = [n for n in need if n not in names]
missing += [] if any(n.endswith(".dist-info/licenses/LICENSE") for n in names) else ["LICENSE"]
missing += [] if any(n.endswith(".data/data/share/man/man1/vtop.1") for n in names) else ["man"]
stray = sorted(n for n in names if n.startswith(("tests/", "docs/", "rules/", "traces/"))
               or (n.startswith("vtop/_rule_tests/") and n.endswith(".py"))
               or (n.startswith("vtop/_traces/") and not n.endswith(".vtrace")))
if missing or stray:
    sys.exit(f"wheel contents: missing {missing}, stray {stray}")
traces = sum(n.startswith("vtop/_traces/") for n in names)
print(f"{len(names)} files: rules, rule tests, schema, {traces} traces, man page, LICENSE in; "
      "no tests or sources outside vtop/")
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

step "vtop --help lists every sub-command"
for command in sim rules trace whatif tune completion; do  # listed, or in `vtop COMMAND …` examples
    grep -Eq -- "([Ss]ub-?commands?:.*[ ,]|^ *|[ ,]|vtop )$command([ ,.:]|\$)" help.txt \
        || problem "vtop --help does not list the sub-command $command"
done

# `man vtop` as a user gets it: no MANPATH, the venv's bin on PATH, from which man-db derives
# <venv>/share/man, where pip put the wheel's page (pyproject's shared-data).
step "man vtop: the installed page, found from PATH, at 80 columns, names every sub-command"
if [ ! -f "$WORK/venv/share/man/man1/vtop.1" ]; then
    problem "the wheel installed no share/man/man1/vtop.1"
elif ! command -v man >/dev/null; then
    problem "man is not installed (Debian package man-db; scripts/test.sh installs it)"
else
    man_vtop() {
        env -u MANPATH PATH="$WORK/venv/bin:$PATH" MANWIDTH=80 MANPAGER=cat LC_ALL=C.UTF-8 man "$@"
    }
    found=$(man_vtop -w vtop 2>&1) || true
    [ "$found" = "$WORK/venv/share/man/man1/vtop.1" ] \
        || problem "man -w vtop finds '$found', not the venv's page"
    man_vtop vtop > man.txt 2> man.err || problem "man vtop failed: $(head -c 300 man.err)"
    echo "$(head -1 man.txt | tr -s ' '): $(wc -l < man.txt) lines"
    commands=$("$WORK/venv/bin/python" -c 'from vtop.cli.dispatch import COMMANDS; print(*COMMANDS)')
    for command in $commands; do
        grep -q "^VTOP ${command^^}\$" man.txt || problem "man vtop has no section for vtop $command"
        grep -Eq "^ +vtop $command( |\$)" man.txt || problem "man vtop's SYNOPSIS lacks vtop $command"
    done
    wide=$(awk 'length($0) > 80' man.txt | wc -l)
    [ "$wide" = 0 ] || problem "man vtop has $wide lines over 80 columns"
    ! grep -n '\\f[BIR]\|\\-' man.txt || problem "man vtop shows roff escapes"
fi

step "vtop --replay memory-ceiling --report (a shipped trace, by name)"
rc=0
"$VTOP" --replay memory-ceiling --report > report.txt 2> report.err || rc=$?
head -1 report.txt | cut -c1-100
[ "$rc" = 2 ] || problem "vtop --replay memory-ceiling --report exited $rc, not 2 (CRITICAL): $(head -c 300 report.err)"
grep -q '^vtop report: CRITICAL (memory-ceiling' report.txt \
    || problem "vtop --replay memory-ceiling --report does not give the memory-ceiling verdict"

step "vtop trace list"
rc=0
"$VTOP" trace list > list.txt 2> list.err || rc=$?
head -3 list.txt
[ "$rc" = 0 ] || problem "vtop trace list exited $rc: $(head -c 300 list.err)"
grep -q '^memory-ceiling ' list.txt || problem "vtop trace list does not list memory-ceiling"
wide=$(awk 'length($0) > 80' list.txt | wc -l)
[ "$wide" = 0 ] || problem "vtop trace list has $wide lines over 80 columns"

# One line on stderr, the documented exit, in under 5 s: what a newcomer's typo (a usage error,
# 2) or a server not yet up (UNKNOWN, 3) must get, not a traceback or a wait for the whole
# report window.
one_line_exit() {  # one_line_exit CODE ARGS…
    local want=$1 rc=0 t0 t1 took lines
    shift
    t0=$(date +%s.%N)
    timeout 60 "$VTOP" "$@" > quick.out 2> quick.err || rc=$?
    t1=$(date +%s.%N)
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    lines=$(wc -l < quick.err)
    echo "vtop $*: exit $rc after $took s, $lines line(s) on stderr: $(head -c 200 quick.err)"
    if [ "$rc" = 124 ]; then
        problem "vtop $*: still running after 60 s (killed), not one line and exit $want"
    elif [ "$rc" != "$want" ]; then
        problem "vtop $*: exit $rc, not $want"
    fi
    [ "$lines" = 1 ] || problem "vtop $*: $lines lines on stderr, not one"
    awk -v t="$took" 'BEGIN { exit !(t < 5) }' || problem "vtop $*: took $took s, not under 5 s"
}

step "a malformed URL: one line, at once; exit 3 under --report, as monitoring plugins do, else 2"
one_line_exit 3 --url 'http://[::1' --report
one_line_exit 2 --url 'http://[::1' --once

step "a dead port: one line, exit 3, at once"
one_line_exit 3 --url http://127.0.0.1:18999 --report

# The browser view from the installed wheel: textual-serve's page and scripts come with the
# dependency, the page is served under the printed token and nothing is served without it.
step "vtop --demo --web 0: the page under the printed token, 403 without it"
"$VTOP" --demo --web 127.0.0.1:0 > web.out 2> web.err &
web_pid=$!
for _ in $(seq 100); do grep -q "^vtop: dashboard at http" web.out && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' web.out || true)
if [ -z "$url" ]; then
    problem "vtop --web printed no URL in 10 s: $(head -c 300 web.err)"
else
    codes=$("$WORK/venv/bin/python" - "$url" <<'EOF'
import sys, urllib.error, urllib.request
def code(url):
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
url = sys.argv[1]
print(code(url), code(url + "static/js/textual.js"), code(url.rsplit("/", 2)[0] + "/"))
EOF
)
    echo "page, its script, without the token: $codes"
    [ "$codes" = "200 200 403" ] || problem "vtop --web: page, script, / answered $codes"
fi
kill -INT "$web_pid" 2>/dev/null || true
wait "$web_pid" || problem "vtop --web did not exit 0 on Ctrl-C"

step "the installed wheel works"
if [ ${#PROBLEMS[@]} -gt 0 ]; then
    printf 'check_wheel: %s\n' "${PROBLEMS[@]}" >&2
    fail "${#PROBLEMS[@]} check(s) failed"
fi
