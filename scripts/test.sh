#!/usr/bin/env bash
# Runs koe's whole test suite on a fresh Debian machine with Go: installs the
# Debian packages the tests need when they are missing, then checks
# formatting, vets, and runs every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use: espeak-ng speaks in the TTS tests,
# pocketsphinx listens in the ASR tests (sox converts test recordings),
# chromium drives koe's web page in the browser tests, bubblewrap and
# python3 run the python tool's sandbox.
packages=(espeak-ng pocketsphinx pocketsphinx-en-us sox chromium bubblewrap python3)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# staticcheck (a pinned release, fetched through the module proxy)
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
go test -race -count=1 -timeout 30m ./...
