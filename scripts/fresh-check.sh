#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12: debootstrap a minbase bookworm root, copy the
# working tree in (tracked and untracked files, no build folders), run scripts/run.sh and then
# scripts/test.sh inside it with chroot, print each command's exit status, time and last lines,
# and remove the root. Not part of CI (25-45 min on 2 cores): run it before resolving an issue
# that changes the set-up, the test command or the dependencies, and quote its summary.
#
# Usage (as root): scripts/fresh-check.sh [--keep] [--reports N] [--sudo] [--wheel [--wheel-file W]]
#   --keep        leave the root (and its logs) for inspection instead of removing it
#   --reports N   the main job's report count (default: run.sh's own, 10 000 000)
#   --sudo        run both commands as a non-root user with sudo rights (the README's other case)
#   --wheel       the pip package instead (README, "Install"): the wheel scripts/build_wheel.sh
#                 makes on this (set-up) machine, or --wheel-file W, is the only thing copied in; the
#                 root gets python3, python3-venv and python3-pip from apt and nothing else (no
#                 compiler: checked), and a user without sudo runs scripts/wheel_smoke.sh there
#                 (venv, pip install, the console script, python -m headsep, a Python plugin).
#                 About 5 min with the wheel built.
# Env: HEADSEP_FRESH_DIR (parent of the root; default /var/tmp), DEBIAN_MIRROR.
#
# Only the host's network set-up crosses into the root: resolv.conf, and certificate authorities
# the site added under /usr/local/share/ca-certificates (ca-certificates, installed by the README's
# set-up, picks them up). Nothing the project needs is preinstalled.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keep=0 reports="" as_user=0 wheel_mode=0 wheel=""
while (($#)); do
  case "$1" in
    --keep) keep=1 ;;
    --reports) reports=$2; shift ;;
    --sudo) as_user=1 ;;
    --wheel) wheel_mode=1 ;;
    --wheel-file) wheel_mode=1 wheel=$(readlink -f "$2"); shift ;;
    *) echo "fresh-check.sh: unknown argument '$1' (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "fresh-check.sh: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
if ((wheel_mode)) && [ -z "$wheel" ]; then  # built here, on the set-up machine, before the root exists
  wheel_out=$(mktemp -d "${HEADSEP_FRESH_DIR:-/var/tmp}/headsep-wheel.XXXXXX")
  bash "$here/scripts/build_wheel.sh" --out "$wheel_out" --no-smoke | tail -20
  wheel=$(ls "$wheel_out"/headsep-*.whl)
fi
if ((wheel_mode)); then
  [ -f "$wheel" ] || { echo "fresh-check.sh: no wheel at '$wheel'" >&2; exit 2; }
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d "${HEADSEP_FRESH_DIR:-/var/tmp}/headsep-fresh.XXXXXX")
chmod 755 "$root"  # a system root: apt's _apt user must reach /var/lib/apt
log=$root.log
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  # and whatever the tests mounted inside (e.g. run/netns), deepest first
  awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  if ((keep)); then echo "fresh-check.sh: kept $root (logs in $root/fresh-*.log)" >&2
  else rm -rf --one-file-system "$root"; fi
  if [ -n "${wheel_out:-}" ]; then rm -rf "$wheel_out"; fi
}
trap cleanup EXIT

# --wheel: python3 + venv + pip from apt as root, then the wheel's smoke test as a plain user
# (scripts/wheel_smoke.sh), with nothing of the source tree in the root but that script.
wheel_check() {
  local run=(chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    LANG=C.UTF-8 TERM=dumb)
  local start rc secs out=$root/fresh-wheel.log
  start=$(date +%s)
  echo "fresh-check.sh: apt-get install python3 python3-venv python3-pip in the fresh root"
  "${run[@]}" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip >/dev/null && useradd -m -s /bin/bash fresh' > "$root/fresh-apt.log" 2>&1 ||
    { tail -15 "$root/fresh-apt.log"; echo "fresh-check.sh: apt-get failed" >&2; return 1; }
  echo "---- apt-get: $(($(date +%s) - start)) s; python: $("${run[@]}" python3 --version 2>&1); compilers: $("${run[@]}" bash -c 'command -v cc gcc g++ c++ clang || echo none')"
  mkdir -p "$root/home/fresh/in"
  cp "$wheel" "$here/scripts/wheel_smoke.sh" "$root/home/fresh/in/"
  "${run[@]}" chown -R fresh: /home/fresh/in
  echo "fresh-check.sh: scripts/wheel_smoke.sh $(basename "$wheel") as user 'fresh' (log: $out)"
  start=$(date +%s)
  set +e
  "${run[@]}" su fresh -s /bin/bash -c "cd /home/fresh && ! command -v cc gcc g++ c++ >/dev/null && bash in/wheel_smoke.sh in/$(basename "$wheel")" > "$out" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - start))
  echo "---- wheel_smoke.sh: exit $rc after $secs s; last lines:"
  tail -15 "$out" | sed 's/^/    /'
  echo "==== fresh-check summary (Debian 12 minbase + python3 python3-venv python3-pip, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores)"
  echo "  $(basename "$wheel") ($(du -h "$wheel" | cut -f1)): pip install + smoke test: exit $rc, $secs s"
  return $rc
}

t0=$(date +%s)
echo "fresh-check.sh: debootstrap --variant=minbase bookworm $root ($mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$log" 2>&1 ||
  { tail -20 "$log"; echo "fresh-check.sh: debootstrap failed" >&2; exit 1; }
echo "fresh-check.sh: base system in $(($(date +%s) - t0)) s ($(du -sh --one-file-system "$root" | cut -f1))"
mv "$log" "$root/fresh-debootstrap.log"

# A fresh install's apt sources: bookworm, its updates and security.
cat > "$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
# The root is a mount point of its own, as / is on a real system (`ip netns add`, used by the MPI
# two-namespace test, remounts / and fails on a plain folder).
mount --bind "$root" "$root" && mounted+=("$root")
for m in proc sys dev dev/pts; do
  mkdir -p "$root/$m"
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    dev) mount --bind /dev "$root/dev" ;;
    dev/pts) mount -t devpts devpts "$root/dev/pts" ;;
  esac
  mounted+=("$root/$m")
done
mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")

if ((wheel_mode)); then
  wheel_check
  exit $?
fi

# The working tree as a user would have it: tracked and untracked files, ignored ones left out.
mkdir -p "$root/src/headsep"
(cd "$here" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) |
  tar -xf - -C "$root/src/headsep"
runner=(env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  LANG=C.UTF-8 TERM=dumb)
prefix="cd /src/headsep &&"
if ((as_user)); then
  chroot "$root" "${runner[@]}" bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null &&
    useradd -m -s /bin/bash fresh && echo "fresh ALL=(ALL) NOPASSWD: ALL" > /etc/sudoers.d/fresh && chown -R fresh: /src/headsep'
  runner=(env -i HOME=/home/fresh PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TERM=dumb)
  prefix="cd /src/headsep && exec sudo -u fresh env HOME=/home/fresh PATH=/usr/local/bin:/usr/bin:/bin"
fi

status=0
summary=()
for cmd in "scripts/run.sh $reports" "scripts/test.sh"; do
  name=${cmd%% *}; name=${name#scripts/}
  out="$root/fresh-${name%.sh}.log"
  echo "fresh-check.sh: running '$cmd' in the fresh root (log: $out)"
  start=$(date +%s)
  set +e
  chroot "$root" "${runner[@]}" bash -c "$prefix bash $cmd" > "$out" 2>&1
  rc=$?
  set -e
  secs=$(($(date +%s) - start))
  echo "---- $cmd: exit $rc after $secs s; last lines:"
  tail -15 "$out" | sed 's/^/    /'
  summary+=("$cmd: exit $rc, $secs s")
  ((rc == 0)) || status=1
done
echo "==== fresh-check summary (Debian 12 minbase, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores)"
for line in "${summary[@]}"; do echo "  $line"; done
exit $status
