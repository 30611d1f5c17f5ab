#!/usr/bin/env bash
# Does the wire a run chooses hold on a busy machine? The same job (P ranks
# over 2 emulated nodes, slurm/emu-nodes.sh, no --wire: the ranks measure
# the link and choose) runs RUNS times at each rate beside two busy loops
# that take the cores the ranks measure with. One TSV row a run: the
# measured link and the wire it sent.
#   usage: slurm/bench/emu-wire-choice.sh [OUT.tsv]   (root: ip netns, tc)
#   env: RATES ("none 1gbit"), P (4), RUNS (5), EPOCHS (5)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/scaling/wire-choice.tsv}
rates=${RATES:-none 1gbit} p=${P:-4} runs=${RUNS:-5} epochs=${EPOCHS:-5}
gen=(--nodes 100000 --edges 1000000 --features 128 --classes 16)
"$bin" gen --out "$tmp/g" "${gen[@]}" --quiet >/dev/null
mkdir -p "$(dirname "$out")" "$tmp/runs"
for _ in 1 2; do
	sh -c 'while :; do :; done' &
	at_exit "kill $!"
done
for rate in $rates; do
	for run in $(seq "$runs"); do
		echo "== $rate run $run" >&2
		# shellcheck disable=SC2086 # $mpirun carries its flags
		slurm/emu-nodes.sh with --nodes 2 --rate "$rate" --name sancus-wire -- \
			$mpirun -np "$p" "$bin" train --data "$tmp/g" --epochs "$epochs" --eval-every 0 \
			--quiet --out "$tmp/runs/$rate-$run.json" >/dev/null
	done
done
python3 - "$tmp/runs" "$*" "${gen[*]}" "$p" "$epochs" "$rates" >"$out" <<'EOF'
import json, os, sys
d, args, gen, p, epochs, rates = sys.argv[1:]
env = " ".join(f"{k}={os.environ[k]!r}" for k in ("RATES", "P", "RUNS", "EPOCHS") if k in os.environ)
print(f"# {env + ' ' if env else ''}slurm/bench/emu-wire-choice.sh {args}".rstrip() + "   (root)")
print(f"# sancus gen {gen}; {p} ranks over 2 emulated nodes, sancus train --epochs {epochs} --eval-every 0, no --wire; two busy loops beside")
print("\t".join(["rate", "run", "link_gbs_measured", "wire_sent", "mean_epoch_ms"]))
for rate in rates.split():
    n = 1
    while os.path.exists(f := os.path.join(d, f"{rate}-{n}.json")):
        r = json.load(open(f))
        print("\t".join([rate, str(n), f"{r.get('link_gbs', 0):.3f}", r["config"]["Wire"]["Fwd"], f"{r['result']['mean_epoch_ms']:.1f}"]))
        n += 1
EOF
cat "$out"
