#!/usr/bin/env bash
# Staleness sweep without Slurm: every policy at P = 2 and 4 under mpirun on
# one machine, then one table and plots. (slurm/staleness.sbatch is the
# same sweep as a batch job.)
#   usage: slurm/bench/staleness-local.sh DATA OUTDIR "MPIRUN [flags]" [EPOCHS]
. "$(dirname "$0")/common.sh" || exit
data=$1 out=$2 mpirun=${3:-$mpirun} epochs=${4:-200}
mkdir -p "$out"
for np in 2 4; do
	shards="$data-P$np"
	[ -f "$shards/meta.json" ] || "$bin" prepare --data "$data" --parts "$np" --out "$shards"
	while read -r policy eps; do
		name="P$np-$policy-$eps"
		bound=(--eps "$eps") # none takes no bound
		[ "$policy" = none ] && bound=()
		$mpirun -np "$np" "$bin" train --shards "$shards" --epochs "$epochs" --quiet \
			--staleness "$policy" "${bound[@]}" --out "$out/$name.json" </dev/null # mpirun would eat the list
	done <<'POLICIES'
none 0
epoch-fixed 1
epoch-fixed 3
epoch-adaptive 1
variation-gap 0.01
variation-gap 0.03
variation-gap 0.1
POLICIES
done
"$bin" report --out "$out" "$out"
