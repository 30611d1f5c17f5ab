#!/usr/bin/env bash
# Epoch times over emulated nodes (slurm/emu-nodes.sh): P ranks placed
# node by node over N namespaces whose uplinks are capped at each rate
# ("none": the same nodes and TCP, no cap), on a generated 100k-node graph,
# --wire fp32 and the default (no --wire: the ranks measure the link and
# choose the wire). The runs take turns, so that the machine's slow spells
# spread over every configuration. One TSV row a configuration: the mean of
# the runs' mean epoch times (training step, epochs after the first), MB
# sent per rank per epoch, the wire each run sent and the link it measured.
# Every node is this machine's cores: a row whose ranks outnumber them says
# so.
#   usage: slurm/bench/emu-scaling.sh [OUT.tsv]   (root: ip netns, tc)
#   env: NODES ("2 4"), PS ("2 4 8"; a P below N is skipped), RATES
#        ("1gbit none"), WIRES ("fp32 default"), RUNS (3), EPOCHS (20)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/scaling/emulated.tsv}
nodes=${NODES:-2 4} ps=${PS:-2 4 8} rates=${RATES:-1gbit none} wires=${WIRES:-fp32 default}
runs=${RUNS:-3} epochs=${EPOCHS:-20}
gen=(--nodes 100000 --edges 1000000 --features 128 --classes 16)
"$bin" gen --out "$tmp/g" "${gen[@]}" --quiet >/dev/null
mkdir -p "$(dirname "$out")" "$tmp/runs"
for run in $(seq "$runs"); do
	for n in $nodes; do
		for p in $ps; do
			[ "$p" -ge "$n" ] || continue
			for rate in $rates; do
				for w in $wires; do
					flags=()
					[ "$w" = default ] || flags=(--wire "$w")
					echo "== N=$n P=$p $rate $w (run $run)" >&2
					# shellcheck disable=SC2086 # $mpirun carries its flags
					slurm/emu-nodes.sh with --nodes "$n" --rate "$rate" --name sancus-scaling -- \
						$mpirun -np "$p" "$bin" train --data "$tmp/g" --epochs "$epochs" --eval-every 0 "${flags[@]}" \
						--quiet --out "$tmp/runs/$n-$p-$rate-$w-$run.json" >/dev/null
				done
			done
		done
	done
done
python3 - "$tmp/runs" "$(nproc)" "$*" "${gen[*]}" "$epochs" >"$out" <<'EOF'
import collections, glob, json, os, statistics, sys
d, cores, args, gen, epochs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
env = " ".join(f"{k}={os.environ[k]!r}" for k in ("NODES", "PS", "RATES", "WIRES", "RUNS", "EPOCHS") if k in os.environ)
print(f"# {env + ' ' if env else ''}slurm/bench/emu-scaling.sh {args}".rstrip() + "   (root)")
print(f"# sancus gen {gen}; sancus train --epochs {epochs} --eval-every 0; {cores} cores shared by every node's ranks")
print("\t".join(["nodes", "ranks", "ranks_per_node", "rate", "wire_flag", "runs", "mean_epoch_ms", "min_ms", "max_ms",
                 "mb_sent_per_rank_epoch", "wire_sent", "link_gbs_measured", "cores"]))
rows = collections.defaultdict(list)
for f in glob.glob(os.path.join(d, "*.json")):
    n, p, rate, w, _ = os.path.basename(f)[:-5].split("-")
    rows[(int(n), int(p), rate, w)].append(json.load(open(f)))
for (n, p, rate, w), rs in sorted(rows.items()):
    ms = [r["result"]["mean_epoch_ms"] for r in rs]
    sent = statistics.mean(statistics.mean(x["bytes_sent"] for x in r["result"]["per_rank"]) / len(r["result"]["curve"]) for r in rs)
    wires = ",".join(r["config"]["Wire"]["Fwd"] for r in rs)
    gbs = ",".join(f"{r['link_gbs']:.3f}" if r.get("link_gbs") else "-" for r in rs)
    over = f"{p} ranks on {cores}: oversubscribed" if p > cores else f"{p} ranks on {cores}"
    print("\t".join(map(str, [n, p, -(-p // n), rate, "--wire " + w if w != "default" else "(none)", len(rs),
                              f"{statistics.mean(ms):.1f}", f"{min(ms):.1f}", f"{max(ms):.1f}", f"{sent / 1e6:.3f}",
                              wires, gbs, over])))
EOF
cat "$out"
