#!/usr/bin/env bash
# Bytes sent per rank per epoch at P = 4: SANCUS as published (dense
# broadcasts, contiguous rows, no staleness) against the sparsity-aware
# exchange on a GREM or METIS reordering, with and without staleness.
#   usage: slurm/bench/bytes-bench.sh DATA OUTDIR "MPIRUN [flags]" [EPOCHS]
. "$(dirname "$0")/common.sh" || exit
data=$1 out=$2 mpirun=${3:-$mpirun} epochs=${4:-200}
name=$(basename "$data")
mkdir -p "$out"
"$bin" prepare --data "$data" --parts 4 --out "$tmp/contiguous" >/dev/null
"$bin" prepare --data "$data" --parts 4 --partitioner grem --out "$tmp/grem" >/dev/null
if command -v gpmetis >/dev/null; then
	"$bin" prepare --data "$data" --parts 4 --partitioner file --parts-file "$(metis_parts "$data" 4)" --out "$tmp/metis" >/dev/null
fi
run() { # label shards flags...
	local label=$1 shards=$2
	shift 2
	[ -d "$shards" ] || return 0
	$mpirun -np 4 "$bin" train --shards "$shards" --epochs "$epochs" --quiet --eval-every 10 \
		--out "$out/$name-$label.json" "$@" </dev/null | grep '^done'
}
run dense-contiguous-none "$tmp/contiguous" --dense-bcast
run sparse-grem-none "$tmp/grem"
run sparse-grem-E1 "$tmp/grem" --staleness epoch-fixed --eps 1
run sparse-metis-none "$tmp/metis"
run sparse-metis-E1 "$tmp/metis" --staleness epoch-fixed --eps 1
run sparse-metis-H0.03 "$tmp/metis" --staleness variation-gap --eps 0.03
"$bin" report --out "$out" "$out"
