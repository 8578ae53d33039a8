#!/usr/bin/env bash
# Mount a filesystem image sized for the scale bench at N repositories (issue 30 §3: 1M), at
# the directory the bench generates into (`$SEEDD_BENCH_DATA/scale-v1/n<N>`), creating the
# image the first time. Needs root (losetup/mount).
#
#   sudo benches/tools/scale-image.sh 1000000
#   SEEDD_BENCH_SCALE=1000,1000000 cargo bench -p seedd-benches --bench scale
#
# Why an image: a generated repository is 7 directories and 5 files of ~7 KB in all; on the
# host's 4 KiB-block ext4 each costs ~48 KB (48 GB at 1M). An ext4 with 1 KiB blocks and
# `inline_data` (small files live in their inode) holds one in ~7 KB of blocks plus 12 inodes
# of 256 bytes: at 1M, 6.8 GB used + 3.3 GB of inode tables, 9.8 GB of the host's disk for a
# sparse 16 GiB image (index and logs of seedd included, ~1 GB). `large_dir`: one storage
# directory of 1M entries exceeds ext4's 2-level hashed directory with 1 KiB blocks
# (ENOSPC at ~150k entries without it).
set -euo pipefail

n="${1:?usage: scale-image.sh N (repositories)}"
data="${SEEDD_BENCH_DATA:-$HOME/.cache/seedd/bench-data}"
dir="$data/scale-v1/n$n"
img="$data/images/scale-v1-n$n.img"
# 12 inodes per repository, plus room for seedd's data directory.
inodes=$(( n * 27 / 2 + 100000 ))
# ~16 KiB of image per repository (blocks, inode tables, index), at least 1 GiB.
size=$(( n * 16 + 1048576 ))K

if mountpoint -q "$dir"; then
    echo "$dir is mounted already"
    exit 0
fi
mkdir -p "$data/images" "$dir"
if [ ! -e "$img" ]; then
    truncate -s "$size" "$img"
    mkfs.ext4 -q -b 1024 -I 256 -O inline_data,large_dir -N "$inodes" -m 0 "$img"
    echo "created $img ($size sparse, $inodes inodes)"
fi
mount -o loop,noatime "$img" "$dir"
df -h "$dir"
