# Sourced by the build and test scripts: the environment both need.
# lavapipe complains once per device unless XDG_RUNTIME_DIR names a 0700 dir.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$XDG_RUNTIME_DIR" ]; then
  export XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/webfusion-xdg-$(id -u)"
  mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
fi
export PATH="$HOME/.cargo/bin:$PATH"
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-900}"
