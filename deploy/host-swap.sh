#!/usr/bin/env bash
# Gives a Docker engine host the swap that frozen sleepers go to (decisions 0178, 0183), as root:
#   - a swap file, when the host has no swap at all;
#   - zswap in front of whatever swap there is, where the kernel has it: a sleeper's pages stay
#     compressed in RAM (about 40 % of their size measured here) and a wake reads them back from
#     there (first reply 2.1–2.8 s here, against 4.1–5.3 s from the disk). Its pool is capped at
#     max_pool_percent of RAM (kernel default 20 %); past that, and with the shrinker under
#     memory pressure, the coldest pages are written on to the disk swap.
# Idempotent: existing swap is kept, zswap is (re)enabled.
# Usage: deploy/host-swap.sh [SIZE (default 2G)] [FILE (default /var/tmp/agent-platform.swap)]
set -euo pipefail

size="${1:-2G}"
file="${2:-/var/tmp/agent-platform.swap}"

if [ "$(awk 'NR > 1' /proc/swaps | wc -l)" -eq 0 ]; then
  if [ ! -s "$file" ]; then
    fallocate -l "$size" "$file" 2>/dev/null ||
      dd if=/dev/zero of="$file" bs=1M count="$(numfmt --from=iec "$size" | awk '{print int($1 / 1048576)}')" status=none
    chmod 600 "$file"
    mkswap -q "$file" >/dev/null
  fi
  swapon "$file"
  echo "swap on: $file ($size)"
fi

zswap=/sys/module/zswap/parameters
if [ -w "$zswap/enabled" ]; then
  # lz4 decompresses fastest; kernels without it keep their default compressor.
  echo lz4 >"$zswap/compressor" 2>/dev/null || true
  [ -w "$zswap/shrinker_enabled" ] && { echo Y >"$zswap/shrinker_enabled" 2>/dev/null || true; }
  echo Y >"$zswap/enabled"
  echo "zswap on: $(cat "$zswap/compressor"), pool up to $(cat "$zswap/max_pool_percent") % of RAM"
else
  echo "this kernel has no zswap: sleepers swap to disk only (slower wakes, decision 0183)" >&2
fi
