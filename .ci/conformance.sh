#!/usr/bin/env bash
# The official MCP conformance suite against `--http` and `--http --stateless` on loopback.
#
#   .ci/conformance.sh [ERA ...]     ERA: 2025-11-25 and/or 2026-07-28 (default: both;
#                                    or set CONFORMANCE_ERAS="2025-11-25 2026-07-28")
#
# Each era runs the scenarios the spec revision asks of a server like ours, against a stateful
# and a stateless instance. A check fails the run unless it is listed in
# .ci/conformance/<era>-<mode>.yaml (the suite's own --expected-failures format, each entry with
# its reason); a listed check that passes fails it too, so the list stays honest. The full
# results (checks.json per scenario, and the runner's log) land in .venv/conformance-results/.
# No scenario reaches OpenAI: the server gets a dummy key and an upstream URL nothing listens on.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A SCENARIOS=(
  [2025-11-25]="server-initialize ping tools-list dns-rebinding-protection server-session-lifecycle server-sse-multiple-streams"
  [2026-07-28]="server-stateless tools-list caching dns-rebinding-protection http-header-validation server-sse-multiple-streams"
)
read -r -a eras <<<"${*:-${CONFORMANCE_ERAS:-2025-11-25 2026-07-28}}"
for era in "${eras[@]}"; do
  [ -n "${SCENARIOS[$era]:-}" ] || { echo "conformance: unknown era '$era' (2025-11-25, 2026-07-28)" >&2; exit 2; }
done

[ -n "${MCP_NODE:-}" ] && [ -n "${MCP_NODE_TOOLS:-}" ] || source .ci/node-tools.sh
suite="${MCP_NODE_TOOLS:-}/@modelcontextprotocol/conformance/dist/index.js"
if [ -z "${MCP_NODE:-}" ] || [ ! -f "$suite" ]; then
  echo "conformance: Node >= 22 or the conformance suite is missing (see .ci/node-tools.sh)" >&2
  exit 1
fi
python=.venv/bin/python
results=.venv/conformance-results
rm -rf "$results"
mkdir -p "$results"
work=$(mktemp -d)
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap 'stop_server; rm -rf "$work"' EXIT

# Starts the server on a free loopback port; sets server_pid and url.
start_server() {
  local log="$1"
  shift
  # No lame duck: SIGTERM then stops it at once (a backgrounded job cannot get SIGINT).
  printf 'server:\n  http:\n    lameduck_s: 0\n' >"$work/config.yaml"
  env -i PATH="$PATH" HOME="$work" XDG_CONFIG_HOME="$work/config" XDG_STATE_HOME="$work/state" \
    OPENAI_API_KEY=sk-conformance-dummy OPENAI_BASE_URL=http://127.0.0.1:9/v1 \
    "$python" openai_responses_mcp.py --config "$work/config.yaml" --http 127.0.0.1:0 "$@" \
    2>"$log" &
  server_pid=$!
  local port="" _
  for _ in $(seq 300); do
    port=$(sed -n 's|.*serving MCP on http://127\.0\.0\.1:\([0-9]*\)/mcp.*|\1|p' "$log")
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "conformance: the server did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
  url="http://127.0.0.1:$port/mcp"
}

# One line per scenario, then every check that did not pass (from the suite's checks.json),
# marked when the baseline expects it.
summarize() {
  "$python" - "$@" <<'EOF'
import json, pathlib, sys

path, scenario, rc, baseline = sys.argv[1:5]
files = sorted(pathlib.Path(path).glob("*/checks.json"))
checks = json.loads(files[-1].read_text()) if files else []
lines = pathlib.Path(baseline).read_text().splitlines()
expected = {line.strip()[2:].strip() for line in lines if line.strip().startswith("- ")}
passed = sum(c["status"] in ("SUCCESS", "INFO", "SKIPPED") for c in checks)
verdict = "ok" if rc == "0" else "FAILED"
print(f"  {scenario:28} {passed:2}/{len(checks):<2} checks pass or skip: {verdict}")
for c in checks:
    if c["status"] not in ("SUCCESS", "INFO", "SKIPPED"):
        listed = scenario in expected or f"{scenario}:{c['id']}" in expected
        message = c.get("errorMessage") or (c.get("details") or {}).get("message") or ""
        first = str(message).splitlines()[0][:150] if message else ""
        print(f"      {'expected ' if listed else ''}{c['status']} {c['id']}: {first}")
EOF
}

failed=()
for era in "${eras[@]}"; do
  for mode in stateful stateless; do
    started=$SECONDS
    flags=()
    [ "$mode" = stateless ] && flags=(--stateless)
    start_server "$results/server-$era-$mode.log" "${flags[@]}"
    baseline=".ci/conformance/$era-$mode.yaml"
    echo "conformance: --spec-version $era against --http${flags[*]:+ ${flags[*]}} ($url), expected failures: $baseline"
    for scenario in ${SCENARIOS[$era]}; do
      out="$results/$era-$mode/$scenario"
      mkdir -p "$out"
      rc=0
      "$MCP_NODE" "$suite" server --url "$url" --spec-version "$era" --scenario "$scenario" \
        --expected-failures "$baseline" --timeout 20000 -o "$out" >"$out/runner.log" 2>&1 || rc=$?
      summarize "$out" "$scenario" "$rc" "$baseline"
      if [ "$rc" -ne 0 ]; then
        # Listed in the baseline but passing now: the runner fails the run for it.
        sed 's/\x1b\[[0-9;]*m//g' "$out/runner.log" \
          | sed -n 's/^  ✓ \(.*\)/      stale baseline entry (passes now, remove it): \1/p'
        failed+=("$era/$mode/$scenario")
      fi
    done
    stop_server
    echo "conformance: $era $mode took $((SECONDS - started)) s"
  done
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "conformance: FAILED: ${failed[*]} (logs in $results/)" >&2
  exit 1
fi
echo "conformance: every check passes or is an expected failure"
