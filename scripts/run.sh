#!/usr/bin/env bash
# Runs koe on a fresh Debian machine with Go: installs espeak-ng (koe's
# default speech engine) when it is missing, then starts the server.
# Arguments go to koe, e.g. ./scripts/run.sh -port 8080 -config my.yaml
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v espeak-ng >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing espeak-ng (koe's default speech engine)..." >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends espeak-ng
fi
go build -o ./koe .
exec ./koe "$@"
