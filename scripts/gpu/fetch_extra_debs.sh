#!/usr/bin/env bash
# Downloads, on a machine that reaches Debian's packages, what the GPU machine
# lacks beyond what shared/device/fetch-debs.sh brings (ZeroMQ, libseccomp):
# Capstone, which the ELF inspector decodes candidates' code with, and
# libiberty (static; the bounded demangler of kforge/core/demangle.h). The
# GPU machine's `eval "$(bash .debs/unpack.sh .debs)"` unpacks every .deb of
# the folder, these included.
#   scripts/gpu/fetch_extra_debs.sh .debs
set -euo pipefail
dir=${1:?usage: fetch_extra_debs.sh DIR}
mkdir -p "$dir"
cd "$dir"
pkgs="libcapstone4 libcapstone-dev libiberty-dev"
apt-get download $pkgs >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get download $pkgs >/dev/null; }
ls ./*capstone*.deb ./libiberty*.deb
