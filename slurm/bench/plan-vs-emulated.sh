#!/usr/bin/env bash
# sancus plan's epoch beside the measured one over emulated nodes
# (slurm/emu-nodes.sh): P ranks placed node by node over N namespaces
# whose uplinks are capped at each rate ("none": no cap), on the generated
# 100k-node graph of emu-scaling.sh, --wire fp32 (the wire is not the
# variable), 20 epochs, no evaluation. Every node is this machine, so all
# ranks share its cores: emu-nodes.sh tells the ranks so (a rank runs
# cores/P kernel threads and, past P = cores, its MPI thread naps between
# tests instead of spinning) and plan is told so (--host-cores). The runs take
# turns in rounds; each round first calibrates plan's compute rates here
# (plan --calibrate: the busiest rank replayed alone on one core at
# CAL_RANKS) and measures the link as the ranks see it (bench comm, two
# ranks on two emulated nodes at each rate: MPI_Bcast GB/s at 1 MiB, µs a
# small message one by one), so that rates, link and runs share the
# machine's load. A row's prediction is the median of its rounds' (each
# round's rates and link), its measurement the median of its runs' median
# epochs (the first epoch left out); beside them, train's own split of the
# busiest rank's epoch into compute and waiting on the network.
#   usage: slurm/bench/plan-vs-emulated.sh [OUT.tsv]   (root: ip netns, tc)
#   env: NODES ("2 4"), PS ("2 4 8"; a P below N is skipped), RATES
#        ("1gbit none"), RUNS (3), EPOCHS (20), CAL_RANKS ("2,4,8"),
#        KEEP (a directory to keep the graph, runs, rates and links in),
#        PREDICT_ONLY (1: measure nothing, predict again from KEEP's),
#        WAIT (train --mpi-wait: auto, spin or nap; default auto),
#        EMU_NAME (the namespaces' prefix, sancus-pve)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/scaling/plan-vs-emulated.tsv}
nodes=${NODES:-2 4} ps=${PS:-2 4 8} rates=${RATES:-1gbit none}
runs=${RUNS:-3} epochs=${EPOCHS:-20} cal=${CAL_RANKS:-2,4,8}
cores=$(nproc)
gen=(--nodes 100000 --edges 1000000 --features 128 --classes 16)
d=${KEEP:-$tmp/runs} g=${KEEP:-$tmp}/g
mkdir -p "$(dirname "$out")" "$d"
[ -f "$g/test.txt" ] || "$bin" gen --out "$g" "${gen[@]}" --quiet >/dev/null
emu() { slurm/emu-nodes.sh with --name "${EMU_NAME:-sancus-pve}" "$@"; }
[ "${PREDICT_ONLY:-0}" = 1 ] || rm -f "$d"/*.json "$d"/load-*
[ "${PREDICT_ONLY:-0}" = 1 ] && runs=0
for run in $(seq "$runs"); do
	echo "== round $run: calibrate, probe the links ($(uptime))" >&2
	"$bin" plan --data "$g" --wire fp32 --calibrate --calibrate-ranks "$cal" --nodes 1 --max-ranks 1 \
		--out "$d/rates-$run.json" >/dev/null
	for rate in $rates; do
		# shellcheck disable=SC2086 # $mpirun carries its flags
		emu --nodes 2 --rate "$rate" -- $mpirun -np 2 "$bin" bench comm --max-mib 1 --out "$d/link-$rate-$run.json" >/dev/null
	done
	for n in $nodes; do
		for p in $ps; do
			[ "$p" -ge "$n" ] || continue
			for rate in $rates; do
				echo "== N=$n P=$p $rate (run $run)" >&2
				uptime >>"$d/load-$run"
				# shellcheck disable=SC2086 # $mpirun carries its flags
				emu --nodes "$n" --rate "$rate" -- \
					$mpirun -np "$p" "$bin" train --data "$g" --epochs "$epochs" --eval-every 0 --wire fp32 \
					--mpi-wait "${WAIT:-auto}" --quiet --out "$d/$n-$p-$rate-$run.json" >/dev/null
			done
		done
	done
	uptime >>"$d/load-$run"
done
# Each row's prediction from each round's rates and link.
rm -f "$d"/plan-*.json
for f in "$d"/[0-9]*-*-*-*.json; do
	b=$(basename "$f" .json)
	IFS=- read -r n p rate run <<<"$b"
	read -r sp ge bu pn bn gbs lat < <(python3 - "$d/rates-$run.json" "$d/link-$rate-$run.json" <<-'EOF'
		import json, sys
		r = json.load(open(sys.argv[1]))["rates"]
		l = json.load(open(sys.argv[2]))
		gbs = next(x["mpi_bcast_gb_s"] for x in l["rows"] if x["bytes"] == 1 << 20)
		print(r["SpMMGflops"], r["GEMMGflops"], r["BlockUs"], r.get("PassNs", 0), r.get("ByteNs", 0), gbs, l["small_messages"]["one_by_one_us"])
	EOF
	)
	"$bin" plan --data "$g" --wire fp32 --nodes "$n" --ranks-per-node $((p / n)) --host-cores "$cores" \
		--link-gbs "$gbs" --latency-us "$lat" --spmm-gflops "$sp" --gemm-gflops "$ge" --block-us "$bu" --pass-ns "$pn" --byte-ns "$bn" \
		--max-ranks "$p" --out "$d/plan-$b.json" >/dev/null
done
python3 - "$d" "$cores" "$*" "${gen[*]}" "$epochs" "$cal" >"$out" <<'EOF'
import collections, glob, json, os, re, statistics as st, sys
d, cores, args, gen, epochs, cal = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
env = " ".join(f"{k}={os.environ[k]!r}" for k in ("NODES", "PS", "RATES", "RUNS", "EPOCHS", "CAL_RANKS", "KEEP", "PREDICT_ONLY", "WAIT") if k in os.environ)
loads = [float(m) for f in glob.glob(os.path.join(d, "load-*")) for m in re.findall(r"load average: ([0-9.]+)", open(f).read())]
rates = [json.load(open(f))["rates"] for f in sorted(glob.glob(os.path.join(d, "rates-*.json")))]
print(f"# {env + ' ' if env else ''}slurm/bench/plan-vs-emulated.sh {args}".rstrip() + "   (root)")
print(f"# sancus gen {gen}; sancus train --epochs {epochs} --eval-every 0 --wire fp32 over emulated nodes; {cores} cores shared by every node's ranks")
print(f"# sancus plan --wire fp32 --nodes N --ranks-per-node P/N --host-cores {cores} --link-gbs (bench comm: MPI_Bcast at 1 MiB, 2 ranks on 2 nodes) "
      f"--latency-us (bench comm: a small message one by one); rates from plan --calibrate --calibrate-ranks {cal} (one core) each round: "
      + "; ".join(f"sparse {r['SpMMGflops']:.2f} GEMM {r['GEMMGflops']:.2f} GFLOP/s, {r['BlockUs']:.2f} us a block, {r.get('PassNs', 0):.2f} ns a row value, {r.get('ByteNs', 0):.3f} ns a byte" for r in rates))
print(f"# 1-minute load average before each run, the previous runs' ranks included: {min(loads):.2f} to {max(loads):.2f} (mean {st.mean(loads):.2f})" if loads else "# load: not recorded")
print("\t".join(["nodes", "ranks", "ranks_per_node", "rate", "runs", "measured_ms", "measured_min_ms", "measured_max_ms",
                 "least_epoch_ms", "predicted_ms", "ratio", "pred_compute_ms", "pred_exposed_ms", "train_compute_ms", "train_wait_ms", "share", "link_gbs",
                 "latency_us", "mb_sent_per_rank_epoch"]))
rows = collections.defaultdict(list)
for f in glob.glob(os.path.join(d, "[0-9]*-*-*-*.json")):
    n, p, rate, run = os.path.basename(f)[:-5].split("-")
    r = json.load(open(f))
    plan = json.load(open(os.path.join(d, f"plan-{n}-{p}-{rate}-{run}.json")))
    pr = next(x for x in plan["rows"] if x["ranks"] == int(p))
    rows[(int(n), int(p), rate)].append((r, pr, plan["cluster"]))
def med(xs): return st.median(xs)
for (n, p, rate), rs in sorted(rows.items()):
    meas = [med([e["ms"] for e in r["result"]["curve"][1:]]) for r, _, _ in rs]
    preds = [pr for _, pr, _ in rs]
    pred = med([pr["epoch_ms"] for pr in preds])
    mid = min(preds, key=lambda pr: abs(pr["epoch_ms"] - pred))  # the median round's terms
    sent = st.mean(st.mean(x["bytes_sent"] for x in r["result"]["per_rank"]) / len(r["result"]["curve"]) for r, _, _ in rs)
    m = med(meas)
    least = min(e["ms"] for r, _, _ in rs for e in r["result"]["curve"][1:])
    ep = lambda r: len(r["result"]["curve"])
    tc = med([max(x["compute_s"] for x in r["result"]["per_rank"]) / ep(r) * 1e3 for r, _, _ in rs])
    tw = med([max(x["comm_wait_s"] for x in r["result"]["per_rank"]) / ep(r) * 1e3 for r, _, _ in rs])
    cl = rs[0][2]
    share = max(1.0, p / cores)
    print("\t".join(map(str, [n, p, p // n, rate, len(rs), f"{m:.1f}", f"{min(meas):.1f}", f"{max(meas):.1f}", f"{least:.1f}", f"{pred:.1f}",
                              f"{pred / m:.2f}", f"{mid['compute_ms']:.1f}", f"{mid['exposed_ms']:.1f}", f"{tc:.1f}", f"{tw:.1f}", f"{share:g}",
                              f"{med([c['LinkGBs'] for _, _, c in rs]):.3f}", f"{med([c['LatencyUs'] for _, _, c in rs]):.0f}", f"{sent / 1e6:.3f}"])))
EOF
cat "$out"
