#!/bin/sh
# Rebuilds the PDF test files from handbook.ms with Debian's groff,
# ghostscript and qpdf (apt-get install groff ghostscript qpdf).
# The files are committed; this only documents how they were made.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
groff -ms -Tps handbook.ms >"$tmp/handbook.ps"
# The Info dictionary's Title, as a producer writes it.
printf '[ /Title (Lantern Works Staff Handbook) /Author (People Team) /DOCINFO pdfmark\n' >"$tmp/info.ps"
gs -q -sDEVICE=pdfwrite -o handbook.pdf "$tmp/handbook.ps" "$tmp/info.ps"
# Cut in the middle: the cross-reference table and the trailer are gone.
head -c "$(($(wc -c <handbook.pdf) / 2))" handbook.pdf >broken.pdf
# A user password: nothing can be read without it (AES-256, as most
# tools write today), and the older RC4 kind the reader knows.
qpdf --encrypt secret secret 256 -- handbook.pdf encrypted.pdf
qpdf --allow-weak-crypto --encrypt secret secret 128 --use-aes=n -- handbook.pdf encrypted-rc4.pdf
# An owner password only: anyone may open and read it.
qpdf --allow-weak-crypto --encrypt '' owner 128 --use-aes=n -- handbook.pdf owner-only.pdf
