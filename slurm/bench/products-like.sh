#!/usr/bin/env bash
# The products-sized graph on one machine: gen --like products
# (2,449,029 nodes, 61,859,140 edges), prepare into PARTS shards (time, peak
# memory), then GCN 2x16 and GraphSAGE 2x128 at P = PARTS under mpirun: ms per
# epoch, peak RSS per rank against its compulsory bytes, ms per million
# nonzeros of Â beside the same model on the 100k planted graph in the
# same run, and test accuracy after the stated epochs.
#   usage: slurm/bench/products-like.sh OUTDIR   (about 10 GB of disk in $TMPDIR)
#   env: EPOCHS (20), PARTS (2), PATH_FLAGS (--precompute=false: the plain
#        path, every layer exchanging; empty: the defaults, layer 1 on ÂX
#        or D⁻¹AX), LOG (products-like.txt)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/powerlaw}
epochs=${EPOCHS:-20}
parts=${PARTS:-2}
pathf=${PATH_FLAGS---precompute=false}
read -ra mpi <<<"$mpirun --bind-to none -np $parts"
mkdir -p "$out"
log=$out/${LOG:-products-like.txt}
: >"$log"
step() { echo "== $*" | tee -a "$log"; }
timed() { /usr/bin/time -f '%e s, peak %M KB' -a -o "$log" "$@"; }
step "gen --like products"
timed "$bin" gen --like products --out "$tmp/products" --quiet | tee -a "$log"
step "prepare --parts $parts $pathf"
# shellcheck disable=SC2086 # PATH_FLAGS carries flags
timed "$bin" prepare --data "$tmp/products" --parts "$parts" $pathf --out "$tmp/sh" --quiet | tee -a "$log"
rm -rf "$tmp/products" # the shards hold what training reads
"$bin" gen --out "$tmp/planted" --quiet >/dev/null
# shellcheck disable=SC2086
"$bin" prepare --data "$tmp/planted" --parts "$parts" $pathf --out "$tmp/psh" --quiet | head -1 | tee -a "$log"
nnz() { grep -o '[0-9]* nonzeros in Â' "$log" | sed -n "$1p" | cut -d' ' -f1; }
for m in "gcn 16 $tmp/psh planted-100k $(nnz 2)" "gcn 16 $tmp/sh products-like $(nnz 1)" \
	"sage 128 $tmp/psh planted-100k $(nnz 2)" "sage 128 $tmp/sh products-like $(nnz 1)"; do
	set -- $m
	step "$4: $1 hidden $2, $epochs epochs"
	"${mpi[@]}" "$bin" train --shards "$3" --model "$1" --hidden "$2" $pathf --epochs "$epochs" \
		--eval-every "$epochs" --quiet --out "$tmp/r.json" >/dev/null
	python3 - "$tmp/r.json" "$3" "$5" <<'EOF' | tee -a "$log"
import json, sys
r = json.load(open(sys.argv[1]))["result"]
meta = json.load(open(sys.argv[2] + "/meta.json"))
ranks = r["per_rank"]
print("ms/epoch %.1f (%.2f per million nonzeros of Â); test acc %.4f after %d epochs; per rank: peak RSS %s MB, compulsory %s MB, peak/compulsory %s" % (
    r["mean_epoch_ms"], r["mean_epoch_ms"] / (int(sys.argv[3]) / 1e6), r["test_acc_at_best_val"], len(r["curve"]),
    [round(x["peak_rss_mb"]) for x in ranks], [round(x["compulsory_mb"]) for x in ranks],
    [round(x["peak_rss_mb"] / x["compulsory_mb"], 2) for x in ranks]))
print("nodes %d; prepare peak %s MB" % (meta["nodes"], meta.get("peak_rss_mb")))
EOF
done
