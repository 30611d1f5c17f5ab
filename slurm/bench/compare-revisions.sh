#!/usr/bin/env bash
# Epoch time of two revisions of sancus on one graph, measured in the same
# run, alternating so that the VM's drift hits both alike: P = 1 and 2
# in-process ranks and P = 2 under mpirun, each REPS times, for each model
# of MODELS (lines "name|train flags"; later flags override EPOCHS).
#   usage: slurm/bench/compare-revisions.sh BASE_REV DATA OUTDIR "MPIRUN [flags]" [EPOCHS] [REPS]
# BASE_REV is built in a temporary git worktree; the other side is the
# working tree's bin/sancus. Writes OUTDIR/compare.tsv (one row per run)
# and OUTDIR/summary.tsv (medians, and new over old).
. "$(dirname "$0")/common.sh" || exit
base=$1 data=$2 out=$3 mpirun=${4:-$mpirun} epochs=${5:-30} reps=${6:-5}
models=${MODELS:-"gcn|--model gcn"}
mkdir -p "$out"
tree=$tmp/tree
at_exit 'git worktree remove --force "$tree" 2>/dev/null'
git worktree add --detach "$tree" "$base" >/dev/null
(cd "$tree" && go build -o bin/sancus ./src/cmd/sancus)
old=$tree/bin/sancus new=bin/sancus
# Each side prepares its own shards: the shard format may differ between them.
for side in old new; do
	"${!side}" prepare --data "$data" --parts 2 --out "$tree/$side-P2" >/dev/null
done
ms() { result "$1" 'r["mean_epoch_ms"]'; }
printf 'revision\tmodel\tmode\trep\tms_per_epoch\n' >"$out/compare.tsv"
for rep in $(seq "$reps"); do
	while IFS='|' read -r model flags; do
		[ -n "$model" ] || continue
		read -ra args <<<"--epochs $epochs --eval-every 0 --quiet $flags"
		for side in old new; do
			bin=${!side}
			rev=$([ "$side" = old ] && echo "$base" || git rev-parse --short HEAD)
			for ranks in 1 2; do
				f=$out/$side-inproc-P$ranks-$rep.json
				"$bin" train --data "$data" --ranks "$ranks" "${args[@]}" --out "$f" >/dev/null </dev/null
				printf '%s\t%s\tin-process P=%d\t%d\t%s\n' "$rev" "$model" "$ranks" "$rep" "$(ms "$f")" >>"$out/compare.tsv"
			done
			f=$out/$side-mpirun-P2-$rep.json
			$mpirun -np 2 "$bin" train --shards "$tree/$side-P2" "${args[@]}" --out "$f" >/dev/null </dev/null
			printf '%s\t%s\tmpirun P=2\t%d\t%s\n' "$rev" "$model" "$rep" "$(ms "$f")" >>"$out/compare.tsv"
		done
	done <<<"$models"
done
rm -f "$out"/*.json
# Median per revision, model and mode, and the new side's over the old.
python3 - "$out/compare.tsv" "$base" <<'PY' | tee "$out/summary.tsv"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
base = sys.argv[2]
print("model\tmode\told_median_ms\tnew_median_ms\tnew_over_old\told_runs\tnew_runs")
for model in dict.fromkeys(r["model"] for r in rows):
    for mode in dict.fromkeys(r["mode"] for r in rows):
        v = {s: [float(r["ms_per_epoch"]) for r in rows if r["model"] == model and r["mode"] == mode and (r["revision"] == base) == (s == "old")] for s in ("old", "new")}
        o, n = statistics.median(v["old"]), statistics.median(v["new"])
        print(f"{model}\t{mode}\t{o:.2f}\t{n:.2f}\t{n / o:.3f}\t{' '.join(f'{x:.1f}' for x in v['old'])}\t{' '.join(f'{x:.1f}' for x in v['new'])}")
PY
