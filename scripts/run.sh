#!/usr/bin/env bash
# Runs koe on a fresh Debian machine with Go: installs espeak-ng and
# pocketsphinx (koe's default speech engines, out and in) when they are
# missing, then starts the server.
# Arguments go to koe, e.g. ./scripts/run.sh -port 8080 -config my.yaml
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for p in espeak-ng pocketsphinx pocketsphinx-en-us; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${missing[*]} (koe's default speech engines)..." >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
go build -o ./koe ./cmd/koe
exec ./koe "$@"
