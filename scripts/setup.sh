#!/usr/bin/env bash
# Installs what `npm start` and `npm test` need, and only what is missing:
# Rust targets, wasm-bindgen-cli at the Cargo.lock version, Debian's Chromium,
# ChromeDriver and lavapipe (Vulkan on the CPU), and the npm packages.
# Idempotent: a second run finds everything present and takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*"; }

# Rust targets: wasm for the browser, aarch64-apple-darwin to type-check Metal.
installed_targets=$(rustup target list --installed)
for target in wasm32-unknown-unknown aarch64-apple-darwin; do
  if ! grep -qx "$target" <<<"$installed_targets"; then
    say "adding Rust target $target"
    rustup target add "$target"
  fi
done

# wasm-bindgen-cli must match the wasm-bindgen crate exactly.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
  say "installing wasm-bindgen-cli $want (found: ${have:-none}); this takes a few minutes"
  # Without --locked: one of its locked dependencies is gone from the registry.
  cargo install wasm-bindgen-cli --version "$want" --force
fi

# Debian packages: the browser and its driver, and the Vulkan CPU driver.
missing=()
for pkg in chromium chromium-driver mesa-vulkan-drivers; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "[setup] missing Debian packages: ${missing[*]}" >&2
    echo "[setup] run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# npm packages, reinstalled only when the lock file changed.
stamp=node_modules/.webfusion-lock-sha
lock_sha=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$lock_sha" ]; then
  say "installing npm packages"
  npm ci --no-audit --no-fund
  echo "$lock_sha" > "$stamp"
fi

say "ready"
