#!/usr/bin/env bash
# Time to accuracy of HopGNN's model migration against both feature-moving
# draws where α is large: the 100k products-like graph with feature rows
# 128 wide (gen --like products --scale 0.04083 --features 128) sent dense
# in bf16 (256 bytes a row), GraphSAGE 2x64, fanouts 15,10, global
# batches of 1000, cut METIS-like (grem --chunk-edges 100000000) at P = 4
# over 2 emulated nodes (slurm/emu-nodes.sh) at RATE (default 1gbit). The
# modes take turns, ROUNDS rounds (default 3) of EPOCHS epochs (default
# 5), each evaluated (full-graph, not counted). BASE names another binary
# whose migration joins each round as a mode of its own (an A/B of two
# builds). Into OUTDIR/time.tsv: per mode, the training seconds until the
# validation accuracy first reached 99% of the best any run reached, per
# round, and each round's over the model-centric mode's of the same round
# (the ratios are under one load; the seconds are the machine's).
#   usage: slurm/bench/hopgnn-time.sh [OUTDIR]   (root: ip netns, tc)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/hopgnn}
mkdir -p "$out" "$tmp/runs"
rate=${RATE:-1gbit} rounds=${ROUNDS:-3} epochs=${EPOCHS:-5}
"$bin" gen --like products --scale 0.04083 --features 128 --out "$tmp/g" --quiet >/dev/null
"$bin" prepare --data "$tmp/g" --parts 4 --partitioner grem --chunk-edges 100000000 --out "$tmp/s" >/dev/null
modes=$tmp/modes
cat >"$modes" <<'M'
features, global draw (model-centric)|--batch-draw global
features, local draw (owner-compute)|--batch-draw local
model, pregather|--batch-draw global --migrate model --pregather
M
[ -z "${BASE:-}" ] || echo "model, pregather ($(basename "$BASE"))|--batch-draw global --migrate model --pregather|$BASE" >>"$modes"
for round in $(seq "$rounds"); do
	while IFS='|' read -r name flags b; do
		echo "== round $round $name" >&2
		# shellcheck disable=SC2086 # $mpirun and $flags carry their flags
		slurm/emu-nodes.sh with --nodes 2 --rate "$rate" --name sancus-hop -- \
			$mpirun -np 4 "${b:-$bin}" train --shards "$tmp/s" --model sage --hidden 64 --wire bf16 --epochs "$epochs" --eval-every 1 \
			--batch sampled --fanouts 15,10 --batch-size 1000 $flags --quiet --out "$tmp/runs/$round|$name.json" >/dev/null </dev/null
	done <"$modes"
done
python3 - "$tmp/runs" "$out/time.tsv" "$rate" "$epochs" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    rnd, name = os.path.basename(f)[:-5].split("|", 1)
    runs[(int(rnd), name)] = json.load(open(f))["result"]
target = 0.99 * max(r["best_val_acc"] for r in runs.values())
def secs(r):
    t = 0.0
    for e in r["curve"]:
        t += e["ms"] / 1e3
        if e["val_acc"] >= target:
            return t
    return None
base = "features, global draw (model-centric)"
o = open(sys.argv[2], "w")
o.write(f"# slurm/bench/hopgnn-time.sh: GraphSAGE 2x64, products-like 100k, features 128 wide (bf16 rows), METIS-like P = 4,\n")
o.write(f"# 2 emulated nodes at {sys.argv[3]}, {sys.argv[4]} epochs; target val {target:.4f} (99% of the best run). Training seconds\n")
o.write("# to target per round (rounds take turns), and each over the model-centric mode's of its round (median)\n")
o.write("mode\tseconds_per_round\tover_model_centric\tmedian_ratio\ttest_acc\n")
for name in dict.fromkeys(n for _, n in sorted(runs)):
    rs = sorted(k for k in runs if k[1] == name)
    s = [secs(runs[k]) for k in rs]
    b = [secs(runs.get((k[0], base), {"curve": []})) for k in rs]
    ratio = [x / y for x, y in zip(s, b) if x and y]
    fmt = lambda v: " ".join("-" if x is None else f"{x:.1f}" for x in v)
    acc = statistics.mean(runs[k]["test_acc_at_best_val"] for k in rs)
    o.write(f"{name}\t{fmt(s)}\t{' '.join(f'{x:.2f}' for x in ratio)}\t{statistics.median(ratio) if ratio else float('nan'):.2f}\t{acc:.4f}\n")
PY
cat "$out/time.tsv"
