#!/usr/bin/env bash
# Runs every test layer, each to the end even when an earlier one failed,
# prints the counts per layer, and exits non-zero if any layer failed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

summary=()
total_passed=0
total_failed=0
status=0

# run_layer NAME COMMAND...: runs the command, counts the tests it reports
# (cargo's "test result:" lines, node's "# pass"/"# fail" lines).
run_layer() {
  local name=$1; shift
  local log; log=$(mktemp)
  printf '\n=== %s: %s\n' "$name" "$*"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local passed failed
  passed=$(grep -aoE 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{ s += $4 } END { print s + 0 }')
  failed=$(grep -aoE '[0-9]+ failed' "$log" | awk '{ s += $1 } END { print s + 0 }')
  passed=$((passed + $(grep -aE '^# pass [0-9]+' "$log" | awk '{ s += $3 } END { print s + 0 }')))
  failed=$((failed + $(grep -aE '^# fail [0-9]+' "$log" | awk '{ s += $3 } END { print s + 0 }')))
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  if [ "$rc" -eq 0 ]; then
    summary+=("ok     $name: $passed passed")
  else
    summary+=("FAILED $name: $passed passed, $failed failed (exit $rc)")
    status=1
  fi
  rm -f "$log"
}

run_layer "native (cargo test, wgpu on Vulkan)" cargo test
run_layer "browser (wasm-bindgen-test, WebGPU in headless Chromium)" cargo test --target wasm32-unknown-unknown
run_layer "release package build" bash scripts/build.sh
run_layer "page (playwright-core against the built package)" node --test --test-concurrency=1 tests/page/
run_layer "Metal path type-checks (aarch64-apple-darwin)" cargo check --target aarch64-apple-darwin --all-targets
run_layer "rustfmt" cargo fmt --check
run_layer "clippy native" cargo clippy --all-targets -- -D warnings
run_layer "clippy wasm" cargo clippy --all-targets --target wasm32-unknown-unknown -- -D warnings

printf '\n=== summary\n'
printf '%s\n' "${summary[@]}"
echo "all layers: $total_passed passed, $total_failed failed"
exit $status
