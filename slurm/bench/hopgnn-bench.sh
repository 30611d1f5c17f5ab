#!/usr/bin/env bash
# HopGNN's model migration (train --batch sampled --migrate model) against
# moving the features, on a products-like graph (gen --like products
# --scale SCALE, default 0.01: about 24k nodes) cut by grem at P = 4
# (--chunk-edges 100000000: one chunk, METIS-like multilevel bisection).
# A 2-layer GCN, fanouts 15,10, global batches of each of BATCHES
# (default 1000 256), 4 in-process ranks (--ranks 4: bytes are counted
# alike under mpirun), EPOCHS epochs (default 20, evaluated every 5) for
# each of SEEDS (default 1 2 3). Per batch size and mode, the mean over
# seeds and epochs of: feature bytes fetched, model bytes moved (weights and gradient
# accumulators between time steps), all sampling bytes, the measured
# R_micro, the busiest rank's share of a time step's micrographs over
# the mean, and the test accuracy at the best validation epoch (mean over
# seeds). Training ms are on a shared machine: not a speed figure.
#   usage: slurm/bench/hopgnn-bench.sh OUTDIR
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/hopgnn}
mkdir -p "$out"
scale=${SCALE:-0.01}
epochs=${EPOCHS:-20}
batches=${BATCHES:-1000 256}
seeds=${SEEDS:-1 2 3}
"$bin" gen --model dcsbm --like products --scale "$scale" --seed 1 --out "$tmp/g" --quiet >/dev/null
"$bin" prepare --data "$tmp/g" --parts 4 --partitioner grem --chunk-edges 100000000 --out "$tmp/s" >"$tmp/prepare.txt"
rows=$tmp/rows.tsv
: >"$rows"
modes=$tmp/modes
cat >"$modes" <<'M'
features, global draw (model-centric)|--batch-draw global
features, local draw|--batch-draw local
model|--batch-draw global --migrate model
model, pregather|--batch-draw global --migrate model --pregather
model, pregather, merge 1|--batch-draw global --migrate model --pregather --merge-micrographs 1
M
for batch in $batches; do while IFS='|' read -r name flags; do
	for seed in $seeds; do
		# shellcheck disable=SC2086
		"$bin" train --shards "$tmp/s" --ranks 4 --seed "$seed" --epochs "$epochs" --eval-every 5 --batch sampled --fanouts 15,10 --batch-size "$batch" $flags --quiet --out "$tmp/r.json" >/dev/null
		python3 - "$tmp/r.json" "$batch	$name" "$seed" >>"$rows" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
c = [e["sampling"] for e in r["curve"]]
mean = lambda f: sum(f(s) for s in c) / len(c)
m = [s.get("migration") for s in c]
if m[0]:
    model = mean(lambda s: s["migration"]["model_bytes"])
    rmicro = mean(lambda s: s["migration"]["r_micro"])
    def peak(s):
        roots = s["migration"]["rank_step_roots"]
        return max(max(col) / (sum(col) / len(col)) for col in zip(*roots))
    imb = f"{mean(peak):.3f}"
else:
    model, rmicro, imb = 0, float("nan"), "-"
print(f'{sys.argv[2]}\t{sys.argv[3]}\t{mean(lambda s: s["feature_bytes"]):.0f}\t{model:.0f}\t{mean(lambda s: s["bytes"]):.0f}\t{rmicro:.4f}\t{imb}\t{r["test_acc_at_best_val"]:.4f}')
PY
	done
done <"$modes"; done
python3 - "$rows" "$out/summary.tsv" "$scale" "$epochs" "$seeds" "$tmp/prepare.txt" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
rows = [[f"{r[0]}\t{r[1]}"] + r[2:] for r in rows]  # batch, mode
part = [l.strip() for l in open(sys.argv[6]) if l.startswith("partition")]
o = open(sys.argv[2], "w")
o.write(f"# GCN, products-like graph (gen --like products --scale {sys.argv[3]}), grem at P = 4, fanouts 15,10,\n")
o.write(f"# {sys.argv[4]} epochs, seeds {sys.argv[5]}: make bench-hopgnn (slurm/bench/hopgnn-bench.sh). Per epoch, mean over seeds:\n")
o.write("# MB of features fetched, MB of model moved, MB of all sampling traffic (requests, answers, features; not the model);\n# R_micro measured; the busiest rank's micrographs\n")
o.write("# in a time step over the mean; test accuracy at the best validation epoch (mean, std over seeds)\n")
if part:
    o.write(f"# {part[0]}\n")
o.write("batch\tmode\tfeature_MB\tmodel_MB\tall_MB\tr_micro\tpeak_load\ttest_acc\tstd\n")
for m in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == m]
    f = lambda i: statistics.mean(float(r[i]) for r in rs)
    avg = lambda i: "-" if rs[0][i] in ("-", "nan") else f"{f(i):.4f}"
    acc = [float(r[7]) for r in rs]
    sd = statistics.stdev(acc) if len(acc) > 1 else 0
    o.write(f"{m}\t{f(2)/1e6:.3f}\t{f(3)/1e6:.3f}\t{f(4)/1e6:.3f}\t{avg(5)}\t{avg(6)}\t{statistics.mean(acc):.4f}\t{sd:.4f}\n")
PY
cat "$out/summary.tsv"
