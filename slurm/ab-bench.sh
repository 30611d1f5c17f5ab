#!/usr/bin/env bash
# Epoch time of two sancus binaries taking turns on the same graph: GCN
# 2×16, GraphSAGE 2×16 and GAT 2×(8 heads × 8) at P = 1 (one process) and
# P = 2 (mpirun), ROUNDS rounds, each configuration run by the old binary
# and then the new one. Prints and writes the median ms per epoch (epochs
# after the first) of each and their ratio.
#   usage: slurm/ab-bench.sh OLD_BIN NEW_BIN DATA OUTDIR "MPIRUN" [ROUNDS]
set -euo pipefail
old=$1 new=$2 data=$3 out=$4 mpirun=$5 rounds=${6:-3}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
models=("gcn|--model gcn --epochs 60" "sage|--model sage --epochs 40" "gat|--model gat --hidden 8 --heads 8 --epochs 8")
raw=$out/runs.tsv
printf 'round\tmodel\tP\tbinary\tms_per_epoch\n' >"$raw"
for r in $(seq "$rounds"); do
	for m in "${models[@]}"; do
		name=${m%%|*} args=${m#*|}
		for p in 1 2; do
			for b in old new; do
				bin=$old
				[ $b = new ] && bin=$new
				launcher=()
				[ "$p" = 2 ] && launcher=($mpirun -np 2)
				# shellcheck disable=SC2086
				"${launcher[@]}" "$bin" train --data "$data" $args --eval-every 0 --quiet --out "$tmp/r.json" >/dev/null
				ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["mean_epoch_ms"])' "$tmp/r.json")
				printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$p" "$b" "$ms" >>"$raw"
			done
		done
	done
done
python3 - "$raw" "$out/summary.txt" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
out = ["model  P  old ms/epoch  new ms/epoch  new/old  (median of %d rounds, taking turns)" % len({r["round"] for r in rows})]
for m in ["gcn", "sage", "gat"]:
    for p in ["1", "2"]:
        med = {b: statistics.median(float(r["ms_per_epoch"]) for r in rows if r["model"] == m and r["P"] == p and r["binary"] == b) for b in ("old", "new")}
        out.append("%-5s  %s  %12.2f  %12.2f  %7.3f" % (m, p, med["old"], med["new"], med["new"] / med["old"]))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
