#!/bin/sh
# Runs a command as root in the CPython 3.14 chroot (xtask/src/debian_python.rs),
# inside the private mount namespace its caller made (unshare --mount): the
# mounts end with the command. Arguments: the chroot, the directory to run in,
# then `rw PATH` or `ro PATH` pairs (host paths shown at their own paths),
# `--`, the command.
set -eu
root=$1 dir=$2
shift 2
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
while [ "$1" != -- ]; do
    mode=$1 path=$2
    shift 2
    if [ -d "$path" ]; then
        mkdir -p "$root$path"
    else
        mkdir -p "$root${path%/*}"
        rm -f "$root$path"
        : >"$root$path"
    fi
    mount --rbind "$path" "$root$path"
    if [ "$mode" = ro ]; then mount -o remount,bind,ro "$root$path"; fi
done
shift
exec chroot "$root" /bin/sh -c 'cd "$0" && exec "$@"' "$dir" "$@"
