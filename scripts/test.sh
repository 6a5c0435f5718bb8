#!/usr/bin/env bash
# Runs koe's whole test suite on a fresh Debian machine with Go: installs the
# Debian packages the tests need when they are missing, then checks
# formatting, vets, and runs every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests use: espeak-ng speaks in the TTS tests,
# pocketsphinx listens in the ASR tests (sox converts test recordings),
# chromium drives koe's web page in the browser tests, bubblewrap and
# python3 run the python tool's sandbox, tmux gives koe chat a terminal,
# ngircd is the IRC server the live chat (Twitch) client is tested against,
# postgresql (15 on bookworm) serves the PostgreSQL store's tests; the
# tests of instances coordinating their turns start their own redis-server
# on loopback.
packages=(espeak-ng pocketsphinx pocketsphinx-en-us sox chromium bubblewrap python3 tmux ngircd postgresql redis-server nginx)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node.js runs the MCP reference server in the mcp tests; a machine may
# have it from elsewhere than Debian.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The MCP reference server (@modelcontextprotocol/server-everything) from
# npm, pinned, kept between runs in a cache directory the mcp tests find
# through KOE_TEST_NPM_DIR.
export KOE_TEST_NPM_DIR="${KOE_TEST_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/koe-test-npm}"
everything_version=2026.8.31
everything_pkg="$KOE_TEST_NPM_DIR/node_modules/@modelcontextprotocol/server-everything/package.json"
if ! grep -qs "\"version\": \"$everything_version\"" "$everything_pkg"; then
  npm install --prefix "$KOE_TEST_NPM_DIR" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$everything_version"
fi

# PostgreSQL with pgvector for the knowledge store's tests: Debian has no
# pgvector, so PGlite (PostgreSQL in WebAssembly, with its pgvector build)
# served over the wire protocol by scripts/pglite/server.mjs, its npm
# packages pinned in scripts/pglite/package.json and kept with the others.
# A DSN already in KOE_TEST_POSTGRES_DSN (a real PostgreSQL with pgvector)
# is used instead.
# npm_pinned installs the dependencies of a package.json under scripts/
# into KOE_TEST_NPM_DIR when one is missing or at another version.
npm_pinned() {
  local pkgs spec name version
  pkgs=$(node -e 'const d = require(process.argv[1]).dependencies; console.log(Object.entries(d).map(([n, v]) => n + "@" + v).join(" "))' "$PWD/$1")
  for spec in $pkgs; do
    name=${spec%@*} version=${spec##*@}
    if ! grep -qs "\"version\": \"$version\"" "$KOE_TEST_NPM_DIR/node_modules/$name/package.json"; then
      npm install --prefix "$KOE_TEST_NPM_DIR" --no-audit --no-fund --loglevel=error $pkgs
      break
    fi
  done
}
npm_pinned scripts/pglite/package.json
# The official openai npm package's Realtime WebSocket client (and ws, which
# it connects with in node), which the /v1/realtime tests drive through
# scripts/realtime/driver.mjs (testkit/realtimesdk).
npm_pinned scripts/realtime/package.json
# Servers started below are stopped, and their files removed, on exit.
pglite_pid="" pglite_out="" pg_dir="" pg_as=()
cleanup() {
  if [ -n "$pglite_pid" ]; then
    kill "$pglite_pid" 2>/dev/null || true; wait "$pglite_pid" 2>/dev/null || true
  fi
  if [ -n "$pglite_out" ]; then rm -f "$pglite_out"; fi
  if [ -n "$pg_dir" ]; then
    "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
}
trap cleanup EXIT
if [ -z "${KOE_TEST_POSTGRES_DSN:-}" ]; then
  pglite_out=$(mktemp)
  KOE_TEST_NPM_DIR="$KOE_TEST_NPM_DIR" node scripts/pglite/server.mjs 0 >"$pglite_out" &
  pglite_pid=$!
  # It prints "listening 127.0.0.1:PORT" when ready (a few seconds).
  for _ in $(seq 300); do
    grep -q '^listening ' "$pglite_out" && break
    kill -0 "$pglite_pid" 2>/dev/null || { echo "PGlite did not start"; exit 1; }
    sleep 0.2
  done
  pglite_addr=$(sed -n 's/^listening //p' "$pglite_out")
  [ -n "$pglite_addr" ] || { echo "PGlite did not listen"; exit 1; }
  # PGlite is one backend behind every connection: pgx must use the simple
  # protocol (see scripts/pglite/server.mjs).
  export KOE_TEST_POSTGRES_DSN="postgres://postgres@$pglite_addr/postgres?sslmode=disable&default_query_exec_mode=simple_protocol&pool_max_conns=4"
fi

# PostgreSQL 15 from Debian for the PostgreSQL history store's tests
# (KOE_TEST_PG_DSN): a throwaway cluster in a temporary directory, on
# loopback and a free port, its socket in that directory too. initdb
# refuses to run as root, so root runs the cluster as the postgres user.
# A DSN already in KOE_TEST_PG_DSN is used instead.
pg_bin=/usr/lib/postgresql/15/bin
if [ -z "${KOE_TEST_PG_DSN:-}" ]; then
  pg_dir=$(mktemp -d)
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$pg_dir"
    pg_as=(runuser -u postgres --)
  fi
  pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${pg_as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust -E UTF8 --no-locale >"$pg_dir/initdb.log" 2>&1 ||
    { cat "$pg_dir/initdb.log"; echo "initdb failed"; exit 1; }
  "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
    -o "-k $pg_dir -h 127.0.0.1 -p $pg_port" start >/dev/null ||
    { cat "$pg_dir/server.log"; echo "PostgreSQL did not start"; exit 1; }
  export KOE_TEST_PG_DSN="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# staticcheck (a pinned release, fetched through the module proxy)
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
go test -race -count=1 -timeout 30m ./...
