# The preamble every benchmark driver in slurm/bench sources first:
#   . "$(dirname "$0")/common.sh" || exit
# It stops the driver at its first failing command, moves it to the
# repository root (the drivers name bin/, data/, results/ and slurm/ from
# there, so their path arguments are relative to it), and holds what the
# drivers share: the binary, the mpirun line, a scratch directory and the
# helpers below.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# The sancus binary (SANCUS overrides).
bin=${SANCUS:-bin/sancus}

# mpirun and its flags (MPIRUN overrides; a driver given them as an
# argument uses those). As root OpenMPI wants an explicit opt-in, and a
# 2-core machine needs --oversubscribe to place more ranks than cores: the
# Makefile's MPIRUN, for drivers run by hand.
root_flag=
[ "$(id -u)" != 0 ] || root_flag=" --allow-run-as-root"
mpirun=${MPIRUN:-mpirun --oversubscribe$root_flag}

# A scratch directory, removed on exit with whatever at_exit adds first.
tmp=$(mktemp -d)
_at_exit=()
at_exit() { _at_exit+=("$1"); }
_cleanup() {
	local c
	for c in "${_at_exit[@]}"; do eval "$c" || true; done
	rm -rf "$tmp"
}
trap _cleanup EXIT

# ranks NP CMD...: CMD on NP ranks under $mpirun. One rank runs as a plain
# process: mpirun -np 1 would bind it to one core, leaving its second
# kernel thread nowhere to run.
ranks() {
	local np=$1
	shift
	if [ "$np" = 1 ]; then
		"$@"
	else
		# shellcheck disable=SC2086 # $mpirun carries its flags
		$mpirun -np "$np" "$@"
	fi
}

# result FILE EXPR: the Python expression EXPR over the "result" object r
# of the results JSON FILE that sancus train wrote.
result() {
	python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["result"]; print(eval(sys.argv[2]))' "$1" "$2"
}

# torch_python prints the first python3 that imports PyTorch (pyenv's may
# lack it, Debian's python3-torch is under /usr/bin), or nothing.
torch_python() {
	local p
	for p in python3 /usr/bin/python3; do
		if "$p" -c 'import torch' 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
}

# metis_parts DATA P: the path of gpmetis's part file cutting DATA (a
# dataset directory, or a METIS .graph file, beside which gpmetis writes)
# into P parts, made once a run (Debian's metis package).
metis_parts() {
	local g=$1 p=$2 m
	case $g in
	*.graph) m=$g ;;
	*)
		m=$tmp/$(basename "$g").graph
		[ -f "$m" ] || "$bin" export-metis --data "$g" --out "$m" >/dev/null || return 1
		;;
	esac
	[ -f "$m.part.$p" ] || gpmetis "$m" "$p" >/dev/null || return 1
	echo "$m.part.$p"
}
