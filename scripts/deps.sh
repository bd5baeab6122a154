#!/bin/sh
# Installs the Debian packages tgraph needs for building and testing, when missing.
# As root it uses apt-get; otherwise it prints the command to run.
#   sh scripts/deps.sh          what the build and the tests need
#   sh scripts/deps.sh demo     that, plus the Fashion-MNIST data `make demo` trains on
#   sh scripts/deps.sh bench    that, plus the peers `make bench` times (PyTorch); neither the
#                               build nor the tests need it
set -e
pkgs="cmake make gcc pkg-config libopenblas-serial-dev libopenblas-dev libxsmm-dev libcmocka-dev libsleef-dev zlib1g-dev python3-numpy python3-scipy python3-dev python3-pytest libopenmpi-dev openmpi-bin"
if [ "${1:-}" = demo ]; then pkgs="$pkgs dataset-fashion-mnist"; fi
if [ "${1:-}" = bench ]; then pkgs="$pkgs python3-torch"; fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "tgraph needs:$missing (or their equivalents on this system)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "tgraph needs these Debian packages; run as root:" >&2
    echo "  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
echo "installing:$missing"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
