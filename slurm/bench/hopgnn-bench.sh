#!/usr/bin/env bash
# HopGNN's model migration (train --batch sampled --migrate model) against
# moving the features, on the 100k products-like graph of bench-strategies
# (gen --like products --scale 0.04083, homophily 0.807) and on the same
# graph drawn with homophily 0.95 (METIS-like cuts 5% of its edges, as
# METIS does real ogbn-products: R_micro ≈ 0.92 at P = 4, HopGNN's Table
# 1), each cut at P = 4 by grem (chunks of 1M edges) and grem-whole
# (--chunk-edges 100000000: one chunk, METIS-like multilevel bisection).
# GraphSAGE 2x64, fp32 (feature rows travel as their nonzeros), fanouts
# 15,10, global batches of 1000, 4 in-process ranks (bytes are counted
# alike under mpirun), EPOCHS epochs (default 2) of seed 1. Per graph,
# partition and mode, the mean over epochs of: feature MB fetched, the
# global draw's over it, MB of model moved (gradient accumulators between
# time steps), MB of all sampling traffic (requests, answers, features;
# not the model), the measured R_micro and the busiest rank's share of a
# time step's micrographs over the mean. Accuracy: hopgnn-accuracy.sh.
#   usage: slurm/bench/hopgnn-bench.sh OUTDIR   (env: HOMOPHILY, PARTS, EPOCHS)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/hopgnn}
mkdir -p "$out"
epochs=${EPOCHS:-2}
rows=$tmp/rows.tsv
: >"$rows"
modes=$tmp/modes
cat >"$modes" <<'M'
features, global draw (model-centric)|--batch-draw global
features, local draw (owner-compute)|--batch-draw local
model|--batch-draw global --migrate model
model, pregather|--batch-draw global --migrate model --pregather
model, pregather, merge 1|--batch-draw global --migrate model --pregather --merge-micrographs 1
M
for h in ${HOMOPHILY:-0.807 0.95}; do
	"$bin" gen --like products --scale 0.04083 --homophily "$h" --out "$tmp/g" --quiet >/dev/null
	for part in ${PARTS:-grem grem-whole}; do
		chunk=()
		[ "$part" = grem-whole ] && chunk=(--chunk-edges 100000000)
		"$bin" prepare --data "$tmp/g" --parts 4 --partitioner grem "${chunk[@]}" --out "$tmp/s" >/dev/null
		while IFS='|' read -r name flags; do
			echo "== h $h $part $name" >&2
			# shellcheck disable=SC2086
			"$bin" train --shards "$tmp/s" --ranks 4 --model sage --hidden 64 --wire fp32 --seed 1 --epochs "$epochs" --eval-every "$epochs" \
				--batch sampled --fanouts 15,10 --batch-size 1000 $flags --quiet --out "$tmp/r.json" >/dev/null
			python3 - "$tmp/r.json" "$h	$part	$name" >>"$rows" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
c = [e["sampling"] for e in r["curve"]]
mean = lambda f: sum(f(s) for s in c) / len(c)
if c[0].get("migration"):
    model = mean(lambda s: s["migration"]["model_bytes"])
    rmicro = f'{mean(lambda s: s["migration"]["r_micro"]):.4f}'
    def peak(s):
        roots = s["migration"]["rank_step_roots"]
        return max(max(col) / (sum(col) / len(col)) for col in zip(*roots))
    imb = f"{mean(peak):.3f}"
else:
    model, rmicro, imb = 0, "-", "-"
print(f'{sys.argv[2]}\t{mean(lambda s: s["feature_bytes"])/1e6:.3f}\t{model/1e6:.3f}\t{mean(lambda s: s["bytes"])/1e6:.3f}\t{rmicro}\t{imb}')
PY
		done <"$modes"
	done
done
python3 - "$rows" "$out/summary.tsv" "$epochs" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
o = open(sys.argv[2], "w")
o.write("# GraphSAGE 2x64 fp32 on the 100k products-like graph (gen --like products --scale 0.04083 --homophily H), P = 4,\n")
o.write(f"# fanouts 15,10, batch 1000, {sys.argv[3]} epochs of seed 1: make bench-hopgnn (slurm/bench/hopgnn-bench.sh). Per epoch:\n")
o.write("# MB of features fetched, the global draw's over it, MB of model moved (accumulators), MB of all sampling traffic\n")
o.write("# (requests, answers, features); R_micro measured; the busiest rank's micrographs in a time step over the mean\n")
o.write("homophily\tpartition\tmode\tfeature_MB\tglobal_over\tmodel_MB\tall_MB\tr_micro\tpeak_load\n")
base = {}
for r in rows:
    if r[2].startswith("features, global"):
        base[(r[0], r[1])] = float(r[3])
for r in rows:
    x = base[(r[0], r[1])] / float(r[3]) if float(r[3]) else float("inf")
    o.write("\t".join(r[:4] + [f"{x:.2f}"] + r[4:]) + "\n")
PY
cat "$out/summary.tsv"
