#!/usr/bin/env bash
# Several cluster nodes on one machine: each node a network namespace (and
# a host name of its own), joined to a Linux bridge by a veth pair whose
# two ends each pass at most rate R, the node's uplink each way. The bridge
# has a namespace of its own, so nothing touches the machine's interfaces;
# the nodes' addresses (10.99.0.0/24) exist only inside these namespaces.
# No latency is added (the model accounts for it; this kernel has no netem).
#
#   slurm/emu-nodes.sh with --nodes N --rate R [--name PREFIX] -- CMD...
#        make the nodes (namespaces PREFIX-n0.. and PREFIX-br; PREFIX
#        default sancus-emu), run CMD in node 0 and remove them all
#        whatever CMD does, ^C too. R in tc units (500mbit, 1gbit, 10gbit;
#        0 or none: no cap).
#   slurm/emu-nodes.sh down [--name PREFIX]
#        remove what a killed run left behind.
#
# CMD is typically `mpirun -np P ...` or `sancus launch -n P -- ...`: with
# no hosts of its own, mpirun places P ranks over the nodes from a hostfile
# (set through OMPI_MCA_orte_default_hostfile), node by node, P/N on each
# (the first P mod N nodes one more), and starts the far ones through an
# agent that runs OpenMPI's daemon in their namespace where ssh would log
# in. Ranks on one node share memory (vader); between nodes they talk TCP
# over the capped veths. Every node is this machine's cores: ranks of all
# nodes share them, so each node offers its share as slots (cores/N, at
# least one; past them mpirun wants --oversubscribe, and then has MPI
# yield while it waits), and SANCUS_HOST_CORES tells sancus that all of
# the job's ranks share this host's cores: a rank runs cores/P kernel
# threads (at least one) and, with more ranks than cores, its MPI thread
# naps between tests instead of spinning (train --mpi-wait auto). sancus
# plan --host-cores models the same sharing. Needs root (ip netns, tc,
# unshare).
set -euo pipefail
usage() { sed -n '9,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
verb=$1
shift
prefix=sancus-emu nodes="" rate=""
while [ $# -gt 0 ]; do
	case $1 in
	--nodes) nodes=${2:?--nodes needs a value}; shift 2 ;;
	--rate) rate=${2:?--rate needs a value}; shift 2 ;;
	--name) prefix=${2:?--name needs a value}; shift 2 ;;
	--) shift; break ;;
	*) echo "emu-nodes: unknown argument $1" >&2; usage ;;
	esac
done
# The prefix names namespaces (PREFIX-n12 must fit a host name) and is
# matched by down: a fixed shape keeps down from removing anything else.
[[ $prefix =~ ^sancus-[a-z0-9-]{1,40}$ ]] || { echo "emu-nodes: a name is sancus- then a-z, 0-9 or - (got $prefix)" >&2; exit 2; }
# Namespaces, veths and qdiscs are root's: say so before the first fails.
[ "$(id -u)" = 0 ] || { echo "emu-nodes: needs root (ip netns, tc): run it with sudo" >&2; exit 2; }

subnet=10.99.0
addr() { echo "$subnet.$(($1 + 1))"; }

# As emu-link.sh: what tbf lets through at once, at least 256 KB (four of
# the veth's 64 KB segments) and 2 ms of the rate, so that the qdisc's
# timer keeps a fast link busy.
burst() {
	python3 - "$1" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1].lower())
if not m:
    sys.exit(f"emu-nodes: rate {sys.argv[1]!r}: give it as 500mbit, 1gbit, 2.5gbit or 10gbit")
bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
print(max(262144, int(bps / 8 / 500)))
PY
}

ours() { ip netns list | awk '{print $1}' | grep -E "^$prefix-(br|n[0-9]+)$" || true; }

down() {
	local all ns pids i
	all=$(ours)
	[ -n "$all" ] || return 0
	# A namespace lives on while a process is in it: its processes end
	# first (TERM, then KILL after 5 s), so that deleting it frees its veths.
	for ns in $all; do
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		# shellcheck disable=SC2086 # a list of process ids
		[ -z "$pids" ] || kill $pids 2>/dev/null || true
	done
	for i in $(seq 50); do
		pids=$(for ns in $all; do ip netns pids "$ns" 2>/dev/null || true; done)
		[ -n "$pids" ] || break
		# shellcheck disable=SC2086 # a list of process ids
		[ "$i" -lt 50 ] || kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
	for ns in $all; do ip netns del "$ns" 2>/dev/null || true; done
	echo "emu-nodes: $prefix down" >&2
}

up() {
	if ! [[ $nodes =~ ^[0-9]+$ ]] || [ "$nodes" -lt 1 ] || [ "$nodes" -gt 64 ]; then
		echo "emu-nodes: give --nodes, 1 to 64" >&2
		exit 2
	fi
	[ -n "$rate" ] || { echo "emu-nodes: give --rate (0 or none: no cap)" >&2; exit 2; }
	[ "$rate" != 0 ] || rate=none
	local b="" i ns br=$prefix-br
	[ "$rate" = none ] || b=$(burst "$rate")
	if [ -n "$(ours)" ]; then
		echo "emu-nodes: namespaces $prefix-* exist already (slurm/emu-nodes.sh down --name $prefix)" >&2
		exit 1
	fi
	ip netns add "$br"
	ip -n "$br" link set lo up
	ip -n "$br" link add br0 type bridge
	ip -n "$br" link set br0 up
	for i in $(seq 0 $((nodes - 1))); do
		ns=$prefix-n$i
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		# Made inside the bridge's namespace, its peer moved straight into
		# the node's: neither end is ever on the machine's own.
		ip -n "$br" link add "n$i" type veth peer name uplink netns "$ns"
		ip -n "$br" link set "n$i" master br0
		ip -n "$br" link set "n$i" up
		ip -n "$ns" addr add "$(addr "$i")/24" dev uplink
		ip -n "$ns" link set uplink up
		if [ "$rate" != none ]; then
			# Both ends: the node's sends leave through uplink, what it
			# receives leaves the bridge through its port.
			ip netns exec "$ns" tc qdisc add dev uplink root tbf rate "$rate" burst "$b" latency 50ms
			ip netns exec "$br" tc qdisc add dev "n$i" root tbf rate "$rate" burst "$b" latency 50ms
		fi
		echo "emu-nodes: node $i ($ns, $(addr "$i")): uplink ${rate/none/uncapped} each way${b:+, burst $b bytes}" >&2
	done
}

# agent writes the rsh agent mpirun starts far daemons with: `agent HOST
# CMD...` runs CMD in HOST's namespace under the node's host name, through
# a shell as ssh would; and the hostfile naming the nodes by address.
agent() {
	local dir=$1 i
	{
		cat <<-'EOF'
			#!/bin/sh
			# emu-nodes.sh's rsh agent for mpirun: agent HOST CMD...
			case $1 in
		EOF
		for i in $(seq 0 $((nodes - 1))); do
			echo "$(addr "$i")) ns=$prefix-n$i ;;"
		done
		cat <<-'EOF'
			*) echo "emu-nodes agent: no node $1" >&2; exit 255 ;;
			esac
			shift
			exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$ns" "$@"
		EOF
	} >"$dir/agent"
	chmod +x "$dir/agent"
	local slots=$(($(nproc) / nodes))
	for i in $(seq 0 $((nodes - 1))); do echo "$(addr "$i") slots=$((slots > 0 ? slots : 1))"; done >"$dir/hosts"
}

# job sets cmd: CMD in node 0 under its host name, mpirun's own runtime
# and the ranks' messages both on the nodes' subnet, shared memory within
# a node and TCP between. Binding off: every node would bind its first
# rank to core 0 of the one machine. SANCUS_LINK tells train what link it
# ran over (its results JSON's link).
job() {
	local dir=$1
	shift
	# shellcheck disable=SC2016,SC2054 # the node's shell expands it; a btl list
	cmd=(ip netns exec "$prefix-n0" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$prefix-n0"
		env OMPI_MCA_btl=self,vader,tcp
		OMPI_MCA_btl_tcp_if_include="$subnet.0/24" OMPI_MCA_oob_tcp_if_include="$subnet.0/24"
		OMPI_MCA_plm_rsh_agent="$dir/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1
		OMPI_MCA_orte_default_hostfile="$dir/hosts"
		OMPI_MCA_rmaps_base_mapping_policy=node OMPI_MCA_rmaps_base_ranking_policy=slot
		OMPI_MCA_hwloc_base_binding_policy=none
		SANCUS_HOST_CORES="$(nproc)"
		SANCUS_LINK="emulated: $nodes nodes, each uplink ${rate/none/uncapped} each way, TCP between nodes, shared memory within"
		"$@")
}

# stop passes a signal on to the job once, and ends it outright on the
# next; the job's 85 (checkpointed: sancus launch on SIGINT or SIGTERM)
# is kept, anything else is 130.
stop() {
	trap 'kill -KILL $child 2>/dev/null' INT TERM
	kill -"$1" "$child" 2>/dev/null || true
	local rc=0
	wait "$child" || rc=$?
	[ "$rc" = 85 ] || rc=130
	exit "$rc"
}

case $verb in
down) down ;;
with)
	[ $# -gt 0 ] || { echo "emu-nodes: give a command after --" >&2; exit 2; }
	dir=$(mktemp -d)
	# Traps first: a ^C while the nodes are being made still removes them
	# (and exits 130), as one during the job does.
	trap 'down; rm -rf "$dir"' EXIT
	trap 'exit 130' INT TERM
	up
	agent "$dir"
	job "$dir" "$@"
	# The job in the background, so that a signal is handled at once (bash
	# runs a trap only after a foreground command ends), and in a process
	# group of its own (set -m), so that a ^C at the terminal reaches it
	# once, passed on by stop, not twice (sancus launch aborts on a second).
	set -m
	"${cmd[@]}" &
	child=$!
	set +m
	trap 'stop INT' INT
	trap 'stop TERM' TERM
	wait "$child"
	;;
*) usage ;;
esac
