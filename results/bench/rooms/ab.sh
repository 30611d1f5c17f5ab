#!/usr/bin/env bash
# Epoch time of base revision OLD against the working tree, taking turns
# (the order flips each rep) on small graphs, in-process ranks.
#   usage: results/bench/rooms/ab.sh OLD [REPS]   (from the repository root)
# Writes results/bench/rooms/ab.tsv: one row per run, its mean epoch and
# its fastest (the least disturbed by other load on a shared machine),
# and prints the medians of both sides beside each other.
set -euo pipefail
old=$1 reps=${2:-5} tmp=$(mktemp -d) out=results/bench/rooms/ab.tsv
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old" && git archive "$old" | tar -x -C "$tmp/old"
(cd "$tmp/old" && go build -o "$tmp/sancus-old" ./src/cmd/sancus)
go build -o "$tmp/sancus-new" ./src/cmd/sancus
"$tmp/sancus-new" gen --out "$tmp/planted-20k" --nodes 20000 --edges 200000 --features 64 --quiet
runs=("testdata/cora 1 gcn --epochs 100" "testdata/cora 2 gcn --epochs 100" "testdata/cora 2 sage --epochs 100"
	"testdata/cora 2 gat --hidden 8 --heads 8 --epochs 30" "$tmp/planted-20k 2 gcn --epochs 20"
	"$tmp/planted-20k 2 sage --epochs 20" "$tmp/planted-20k 2 gat --hidden 8 --heads 8 --epochs 4")
printf 'side\tdata\tranks\tmodel\trep\tmean_ms\tmin_ms\n' >"$out"
for rep in $(seq "$reps"); do
	sides="old new"; [ $((rep % 2)) = 0 ] && sides="new old"
	for r in "${runs[@]}"; do
		read -r data ranks model flags <<<"$r"
		for side in $sides; do
			"$tmp/sancus-$side" train --data "$data" --ranks "$ranks" --model "$model" $flags --eval-every 0 --quiet --out "$tmp/r.json" >/dev/null
			ms=$(python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["result"]; print(r["mean_epoch_ms"], min(e["ms"] for e in r["curve"]), sep="\t")' "$tmp/r.json")
			printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$side" "$(basename "$data")" "$ranks" "$model" "$rep" "$ms" >>"$out"
		done
	done
done
python3 - "$out" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("data        P model | fastest epoch (ms)      | mean epoch (ms): median (min-max) of runs")
print("                    |   old    new  new/old  |   old                 new                 new/old")
for k in dict.fromkeys((r["data"], r["ranks"], r["model"]) for r in rows):
    v = {(s, c): sorted(float(r[c]) for r in rows if (r["data"], r["ranks"], r["model"]) == k and r["side"] == s)
         for s in ("old", "new") for c in ("min_ms", "mean_ms")}
    m = {sc: statistics.median(x) for sc, x in v.items()}
    f = lambda x: f"{statistics.median(x):6.2f} ({x[0]:.1f}-{x[-1]:.1f})"
    print(f"{k[0]:<11} {k[1]} {k[2]:<5} | {m['old', 'min_ms']:6.2f} {m['new', 'min_ms']:6.2f}  {m['new', 'min_ms'] / m['old', 'min_ms']:.3f}   "
          f"| {f(v['old', 'mean_ms']):<19} {f(v['new', 'mean_ms']):<19} {m['new', 'mean_ms'] / m['old', 'mean_ms']:.3f}")
PY
