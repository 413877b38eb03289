#!/usr/bin/env bash
# Prepares a Docker engine host's storage for hard per-gateway limits (decision 0216), as root:
# a btrfs filesystem in a sparse image file, loop-mounted at MOUNT with quotas on. The worker
# (STORAGE_ROOT=MOUNT) makes every new gateway volume a subvolume there with a qgroup limit on
# its referenced bytes (state and /tmp together), changed live. Needs btrfs-progs.
# This kernel has no ext4/XFS project quotas (CONFIG_QFMT_V2 and CONFIG_XFS_QUOTA unset), hence
# btrfs, built in wherever Docker's btrfs driver works.
# Idempotent: an image that exists is mounted again (never reformatted), a mount is kept.
# A disk or partition of its own is better in production: pass it as IMAGE with SIZE "-" (a loop
# file costs synchronous writes a second journal: ext4 in a loop file is itself ~0.6x of plain
# ext4 here, decision 0227).
# Usage: deploy/host-storage.sh [SIZE (default 100G)] [IMAGE (default /var/lib/agent-platform/storage.img)]
#                               [MOUNT (default /var/lib/agent-platform/storage)]
set -euo pipefail

size="${1:-100G}"
image="${2:-/var/lib/agent-platform/storage.img}"
mount_point="${3:-/var/lib/agent-platform/storage}"

command -v mkfs.btrfs >/dev/null || { echo "btrfs-progs is not installed (apt-get install btrfs-progs)" >&2; exit 1; }
grep -qw btrfs /proc/filesystems || modprobe btrfs 2>/dev/null || { echo "this kernel has no btrfs" >&2; exit 1; }

# nodiscard: with the kernel's default discard=async every extent btrfs frees (copy-on-write
# frees one per rewrite) punches a hole in the image file, and the next write there allocates
# again in the host's filesystem: synchronous small writes (SQLite's) ran 0.40x of plain ext4
# with it, 0.58x without (decision 0227). The image then keeps its high-water mark on the host;
# btrfs reuses the space inside it.
options="nodiscard"

mkdir -p "$mount_point" "$(dirname "$image")"
if ! mountpoint -q "$mount_point"; then
  if [ ! -e "$image" ]; then
    truncate -s "$size" "$image" # sparse: the host's disk is used as gateways write
  fi
  if ! blkid -t TYPE=btrfs "$image" >/dev/null 2>&1; then
    mkfs.btrfs -q "$image"
  fi
  if [ -b "$image" ]; then mount -o "$options" "$image" "$mount_point"; else mount -o "loop,$options" "$image" "$mount_point"; fi
else
  mount -o "remount,$options" "$mount_point" # a mount of an earlier run takes today's options
fi
[ "$(stat -f -c %T "$mount_point")" = btrfs ] || { echo "$mount_point is not btrfs" >&2; exit 1; }
# Quotas: idempotent; the kernel accounts every subvolume from here on.
btrfs quota enable "$mount_point"
# Counts an earlier run left inconsistent: btrfs enforces no limit until a rescan (decision 0243).
if btrfs qgroup show "$mount_point" 2>&1 >/dev/null | grep -qi inconsistent; then
  echo "the quota counts were inconsistent: rescanning (limits hold again after it)"
  btrfs quota rescan -w "$mount_point" >/dev/null
fi
echo "storage for gateway limits: $mount_point (btrfs, quotas on; STORAGE_ROOT=$mount_point)"
