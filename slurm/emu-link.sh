#!/usr/bin/env bash
# A cluster's link on one machine: a network namespace whose loopback
# carries every rank's traffic through a token-bucket filter of rate R.
# MPI jobs run inside it talk TCP over that loopback (no shared memory), so
# the link is what they wait on. It models one shared link of rate R
# without added latency: for P ranks with symmetric traffic, per-node links
# of about R/P each way. Scale R to the hardware it stands for: a 2-core
# rank here computes roughly 100x slower than a datacenter GPU, so 1 Gbit/s
# next to this CPU is a link of about 100 Gbit/s next to a GPU.
#
#   slurm/emu-link.sh up --rate R [--name N]     make namespace N (default sancus-link) at rate R
#                                                (tc units: 500mbit, 1gbit, 2.5gbit, 10gbit; none: no limit)
#   slurm/emu-link.sh run [--name N] -- CMD...   run CMD inside it, MPI over TCP on its loopback
#   slurm/emu-link.sh down [--name N]            end its processes and remove it
#   slurm/emu-link.sh with --rate R [--name N] -- CMD...
#                                                up, run, down: removed whatever CMD does, ^C too
#
# Only the namespace's own loopback is touched: no other interface, no
# other address. Needs root (ip netns, tc).
set -euo pipefail
usage() { sed -n '12,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
verb=$1
shift
name=sancus-link rate=""
while [ $# -gt 0 ]; do
	case $1 in
	--rate) rate=${2:?--rate needs a value}; shift 2 ;;
	--name) name=${2:?--name needs a value}; shift 2 ;;
	--) shift; break ;;
	*) echo "emu-link: unknown argument $1" >&2; usage ;;
	esac
done
case $name in sancus-*) ;; *) echo "emu-link: a namespace name starts with sancus- (got $name)" >&2; exit 2 ;; esac
# Namespaces, veths and qdiscs are root's: say so before the first fails.
[ "$(id -u)" = 0 ] || { echo "emu-link: needs root (ip netns, tc): run it with sudo" >&2; exit 2; }

# burst is what tbf lets through at once, at loopback speed: a message
# under it crosses faster than the rate would carry it, so it is kept
# small; but at least 256 KB (four of loopback's 64 KB packets) and 2 ms
# of the rate, so that the qdisc's timer keeps a fast link busy.
burst() {
	python3 - "$1" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1].lower())
if not m:
    sys.exit(f"emu-link: rate {sys.argv[1]!r}: give it as 500mbit, 1gbit, 2.5gbit or 10gbit")
bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
print(max(262144, int(bps / 8 / 500)))
PY
}

up() {
	[ -n "$rate" ] || { echo "emu-link: up needs --rate (or --rate none)" >&2; exit 2; }
	local b=""
	[ "$rate" = none ] || b=$(burst "$rate")
	if ip netns list | grep -qw "^$name"; then
		echo "emu-link: namespace $name exists already (slurm/emu-link.sh down --name $name)" >&2
		exit 1
	fi
	ip netns add "$name"
	ip netns exec "$name" ip link set lo up
	if [ "$rate" != none ]; then
		ip netns exec "$name" tc qdisc add dev lo root tbf rate "$rate" burst "$b" latency 50ms
	fi
	echo "emu-link: $name up, loopback at ${rate}${b:+, burst $b bytes}" >&2
}

down() {
	ip netns list | grep -qw "^$name" || return 0
	local pids
	pids=$(ip netns pids "$name" 2>/dev/null || true)
	[ -z "$pids" ] || kill $pids 2>/dev/null || true
	ip netns del "$name"
	echo "emu-link: $name down" >&2
}

run() {
	[ $# -gt 0 ] || { echo "emu-link: run needs a command after --" >&2; exit 2; }
	ip netns list | grep -qw "^$name" || { echo "emu-link: no namespace $name (slurm/emu-link.sh up --rate R)" >&2; exit 1; }
	# Every byte between ranks over TCP on this loopback: OpenMPI's TCP
	# transport (no shared memory) and its runtime both kept to lo.
	# SANCUS_LINK tells train what link it ran over (its results JSON's link).
	local r
	r=$(ip netns exec "$name" tc qdisc show dev lo | grep -o 'rate [^ ]*' | cut -d' ' -f2 || true)
	ip netns exec "$name" env OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo \
		OMPI_MCA_oob_tcp_if_include=lo PRTE_MCA_oob_tcp_if_include=lo \
		SANCUS_LINK="emulated: one shared loopback, ${r:-no rate limit}, TCP" "$@"
}

case $verb in
up) up ;;
down) down ;;
run) run "$@" ;;
with)
	# Traps first: a ^C while the namespace is being set up still takes it
	# down (and exits 130), as one during the job does.
	trap down EXIT
	trap 'exit 130' INT TERM
	up
	# The job in the background, so that a signal is handled at once (bash
	# runs a trap only after a foreground command ends).
	run "$@" &
	child=$!
	trap 'kill -TERM $child 2>/dev/null; wait $child || true; exit 130' INT TERM
	wait $child
	;;
*) usage ;;
esac
