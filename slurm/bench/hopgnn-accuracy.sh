#!/usr/bin/env bash
# Accuracy of HopGNN's model migration against moving the features, on
# the 100k products-like graph of bench-strategies (gen --like products
# --scale 0.04083) cut by grem at P = 4 (--chunk-edges 100000000: one
# chunk, METIS-like): GraphSAGE-mean 2×64, fp32, fanouts 15,10, global
# batches of 1000, 4 in-process ranks, EPOCHS epochs (default 10, each
# evaluated), seeds SEEDS (default 1 2 3). Modes: the features-move
# global draw (model-centric), the local draw, model migration with
# pre-gathering, and the same with --merge-micrographs auto. Per mode,
# into OUTDIR/accuracy-EPOCHSep.tsv: the test accuracy after the first
# epoch and at the best validation epoch (means and sample sd over
# seeds), the iterations that fell back to fetching features (summed over
# epochs and seeds) and the time steps merged, epoch by epoch. HOMOPHILY
# (default 0.807, the graph's own) draws the graph with another (0.95:
# hopgnn-bench.sh's graph of HopGNN's locality) into
# accuracy-EPOCHSep-hHOMOPHILY.tsv.
#   usage: slurm/bench/hopgnn-accuracy.sh [OUTDIR]
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/hopgnn}
mkdir -p "$out"
epochs=${EPOCHS:-10}
seeds=${SEEDS:-1 2 3}
h=${HOMOPHILY:-0.807}
file=accuracy-${epochs}ep
[ "$h" = 0.807 ] || file=$file-h$h
"$bin" gen --like products --scale 0.04083 --homophily "$h" --out "$tmp/g" --quiet >/dev/null
"$bin" prepare --data "$tmp/g" --parts 4 --partitioner grem --chunk-edges 100000000 --out "$tmp/s" >/dev/null
rows=$tmp/rows.tsv
: >"$rows"
while IFS='|' read -r name flags; do
	for seed in $seeds; do
		echo "== $name seed $seed" >&2
		# shellcheck disable=SC2086
		"$bin" train --shards "$tmp/s" --ranks 4 --model sage --hidden 64 --wire fp32 --seed "$seed" --epochs "$epochs" --eval-every 1 \
			--batch sampled --fanouts 15,10 --batch-size 1000 $flags --quiet --out "$tmp/r.json" >/dev/null
		python3 - "$tmp/r.json" "$name" "$seed" >>"$rows" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
m = [e["sampling"].get("migration") for e in r["curve"]]
fell = sum(x["fallback_batches"] for x in m) if m[0] else 0
merged = ",".join(str(x["merged"]) for x in m) if m[0] else "-"
print(f'{sys.argv[2]}\t{sys.argv[3]}\t{r["test_acc_at_best_val"]:.4f}\t{fell}\t{merged}\t{r["curve"][0]["test_acc"]:.4f}')
PY
	done
done <<'M'
features, global draw|--batch-draw global
features, local draw|--batch-draw local
model, pregather|--batch-draw global --migrate model --pregather
model, pregather, merge auto|--batch-draw global --migrate model --pregather --merge-micrographs auto
M
python3 - "$rows" "$out/$file.tsv" "$epochs" "$seeds" "$h" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
o = open(sys.argv[2], "w")
o.write(f"# GraphSAGE 2x64 on the 100k products-like graph (gen --like products --scale 0.04083 --homophily {sys.argv[5]}), grem at P = 4,\n")
o.write(f"# fanouts 15,10, batch 1000, {sys.argv[3]} epochs, seeds {sys.argv[4]}: HOMOPHILY={sys.argv[5]} EPOCHS={sys.argv[3]} slurm/bench/hopgnn-accuracy.sh. Test accuracy after\n")
o.write("# epoch 1 and at the best validation epoch, mean and sd over seeds, and per seed; iterations fallen back to\n# fetching features (all epochs and seeds); per seed, time steps merged away epoch by epoch\n")
o.write("mode\ttest_acc_ep1\tsd\ttest_acc\tsd\tper_seed\tfallback\tmerged\n")
for m in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == m]
    acc, first = [float(r[2]) for r in rs], [float(r[5]) for r in rs]
    sd = lambda x: statistics.stdev(x) if len(x) > 1 else 0
    o.write(f"{m}\t{statistics.mean(first):.4f}\t{sd(first):.4f}\t{statistics.mean(acc):.4f}\t{sd(acc):.4f}\t{' '.join(r[2] for r in rs)}\t{sum(int(r[3]) for r in rs)}\t{' '.join(r[4] for r in rs)}\n")
PY
cat "$out/$file.tsv"
