#!/bin/sh
# Makes a self-signed certificate for trying TLS out, for nginx
# (deploy/nginx.conf reads /etc/nginx/tls/koe.crt and koe.key; compose.yaml
# mounts deploy/tls there) or for koe itself (server.tls_cert, tls_key).
# Browsers warn about a self-signed certificate: use one from your CA or
# ACME client for real users.
#
#   deploy/make-cert.sh [DIR [NAME...]]   (default: deploy/tls, localhost)
#
# The key is made here, on this machine, and never committed.
set -eu
dir=${1:-$(dirname "$0")/tls}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- localhost
san="DNS:localhost,IP:127.0.0.1"
for name in "$@"; do
  [ "$name" = localhost ] || san="$san,DNS:$name"
done
mkdir -p "$dir"
umask 077
# ECDSA P-256: the cheapest full handshake (see docs/operations.md).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -days 365 -subj "/CN=$1" -addext "subjectAltName=$san" \
  -keyout "$dir/koe.key" -out "$dir/koe.crt" 2>/dev/null
chmod 644 "$dir/koe.crt"
echo "made $dir/koe.crt and $dir/koe.key (for $san, valid 365 days)"
