#!/usr/bin/env bash
# The GPU checks on a host that has the CUDA toolkit and PyTorch but no Go
# and no MPI (a lent GPU machine with no network).
#
#   kernels/cuda/gpu-host.sh pack        here: a trimmed Go toolchain, the
#                                        vendored modules, OpenMPI's runtime
#                                        and the last committed sancus.cu
#                                        into .dev/ (git-ignored, ~40 MB)
#   kernels/cuda/gpu-host.sh run OUT     there, with .dev/ carried: build,
#                                        make test-cuda, then sancus against
#                                        PyTorch on one GPU; logs and JSON
#                                        under OUT, a table at the end
#   kernels/cuda/gpu-host.sh large OUT N there: GCN and GraphSAGE against
#                                        PyTorch on a generated N-node graph
#
# If the working tree's sancus.cu does not compile, run builds the last
# committed one: its kernels are a subset, and the backend runs the missing
# optional operations on host copies (TestOptionalKernelsMatchCPU fails,
# naming them), so the rest of the checks still run.
set -uo pipefail
cd "$(dirname "$0")/../.."

pack() {
	mkdir -p .dev/mpi/lib .dev/mpi/include
	grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >>.git/info/exclude
	local goroot
	goroot=$(go env GOROOT)
	tar -C "$(dirname "$goroot")" -cJf .dev/go.tar.xz --exclude='*_test.go' --exclude='*/testdata' \
		--exclude=go/test --exclude=go/doc --exclude=go/api --exclude=go/misc --exclude=go/src/cmd \
		--exclude=go/pkg/tool/linux_amd64/pprof --exclude=go/pkg/tool/linux_amd64/trace "$(basename "$goroot")"
	go mod vendor && tar -cJf .dev/vendor.tar.xz vendor && rm -rf vendor
	local inc=/usr/lib/x86_64-linux-gnu/openmpi/include
	cp "$inc"/mpi.h "$inc"/mpi_portable_platform.h "$inc"/mpi-ext.h .dev/mpi/include/
	for l in libmpi.so.40 libopen-rte.so.40 libopen-pal.so.40 libhwloc.so.15 libevent_core-2.1.so.7 \
		libevent_pthreads-2.1.so.7 libudev.so.1; do
		cp -L /lib/x86_64-linux-gnu/$l .dev/mpi/lib/
	done
	ln -sf libmpi.so.40 .dev/mpi/lib/libmpi.so
	git show HEAD:kernels/cuda/sancus.cu >.dev/sancus-base.cu
	du -sh .dev
}

# setup unpacks, builds bin/sancus-cuda and, with base set, the baseline
# bin/sancus-cuda-base from the last committed kernels.
setup() {
	local out=$1 base=$2
	mkdir -p "$out"
	step "unpack"
	mkdir -p /tmp/dev && tar -xJf .dev/go.tar.xz -C /tmp/dev && tar -xJf .dev/vendor.tar.xz || return 1
	export GOROOT=/tmp/dev/go PATH=/tmp/dev/go/bin:$PATH GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOCACHE=/tmp/dev/cache
	# gompi compiles against this fixed include path.
	mkdir -p /usr/lib/x86_64-linux-gnu/openmpi/include && cp .dev/mpi/include/* /usr/lib/x86_64-linux-gnu/openmpi/include/
	export CGO_LDFLAGS="-L$PWD/.dev/mpi/lib" LD_LIBRARY_PATH=$PWD/.dev/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	local nvcc
	nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
	export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc")")}
	nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
	echo "nvcc: $nvcc; CUDA_HOME=$CUDA_HOME; $(go version)" | tee -a "$out/gpu.txt"

	step "ptx"
	if ! make kernels/cuda/sancus.ptx >"$out/ptx.txt" 2>&1; then
		cat "$out/ptx.txt"
		echo "!! the working tree's sancus.cu failed to compile: building the last committed one"
		cp .dev/sancus-base.cu kernels/cuda/sancus.cu
		make kernels/cuda/sancus.ptx 2>&1 | tail -5
	fi
	if [ -n "$base" ]; then
		step "build (and the last committed kernels, as the baseline)"
		cp kernels/cuda/sancus.cu /tmp/dev/sancus.cu
		cp .dev/sancus-base.cu kernels/cuda/sancus.cu && make cuda 2>&1 | tail -5 && mv bin/sancus-cuda bin/sancus-cuda-base
		cp /tmp/dev/sancus.cu kernels/cuda/sancus.cu
	fi
	make cuda 2>&1 | tail -20
	test -x bin/sancus-cuda
}

t0=$SECONDS
step() { echo "== $((SECONDS - t0)) s: $*"; }

run() {
	local out=${1:?usage: gpu-host.sh run OUT}
	setup "$out" base || return 1
	step "make test-cuda"
	timeout 300 make test-cuda 2>&1 | tee "$out/test-cuda.txt" | grep -E "^(---|ok|FAIL|PASS)|worst|panic|rror|_test.go"
	step "benchmarks: the 100k graph"
	local g=/tmp/g100k
	bin/sancus-cuda gen --out $g --p-in 0.8 --feature-signal 0.5 --quiet >/dev/null || return 1
	local v
	for v in sancus-cuda sancus-cuda-base; do # this tree's kernels, then the packed baseline
		test -x bin/$v || continue
		step "bench kernels: $v"
		timeout 120 bin/$v bench kernels --data $g --device cuda --epochs 30 --out "$out/$v-kernels.json" 2>&1 |
			tee "$out/$v-kernels.txt" | grep -E "ms/epoch|triad|SpMM|^ +[0-9]+ "
	done
	timeout 90 python3 kernels/cuda/torch_gcn.py $g --epochs 50 --out "$out/torch-gcn.json"
	local m args
	# GAT's hidden is per head (8 heads): 8 is the paper's 64 wide, 32 is 256 wide.
	for m in "gcn 16" "gcn 256" "gcn-plain 16" "sage 16" "sage 256" "gat 8" "gat 32"; do
		set -- $m
		case $1 in
		gcn) args=(--model gcn) ;;
		gcn-plain) args=(--model gcn --precompute=false) ;;
		*) args=(--model $1) ;;
		esac
		step "$1 hidden $2"
		for v in sancus-cuda sancus-cuda-base; do
			# (the baseline's attention runs on host copies: at 256 wide, minutes)
			[ "$1 $2" = "gat 32" ] && [ $v = sancus-cuda-base ] && continue
			timeout 90 bin/$v train --data $g --device cuda "${args[@]}" --hidden $2 --epochs 30 --eval-every 0 --quiet \
				--out "$out/$v-$1-$2.json" >/dev/null 2>"$out/$v-$1-$2.err" || tail -3 "$out/$v-$1-$2.err"
		done
		timeout 90 python3 slurm/bench/torch_gnn.py $g --device cuda --model ${1%-plain} --hidden $2 --epochs 30 --seeds 1 --train-only \
			2>&1 | tail -1 | tee "$out/torch-$1-$2.txt"
	done
	step "table"
	python3 - "$out" <<'EOF'
import json, os, re, sys
out = sys.argv[1]
def ms(f):
    try:
        return json.load(open(os.path.join(out, f)))["result"]["mean_epoch_ms"]
    except (OSError, ValueError, KeyError):
        return float("nan")
print("%-10s %6s %12s %14s %12s %7s" % ("model", "hidden", "sancus ms", "(base kernels)", "PyTorch ms", "ratio"))
for f in sorted(os.listdir(out)):
    m = re.match(r"sancus-cuda-(gcn|gcn-plain|sage|gat)-(\d+)\.json$", f)
    if not m:
        continue
    s, base = ms(f), ms("sancus-cuda-base-%s-%s.json" % m.groups())
    t = open(os.path.join(out, "torch-%s-%s.txt" % m.groups())).read()
    tm = re.search(r"([\d.]+) ms/epoch", t)
    tv = float(tm.group(1)) if tm else float("nan")
    print("%-10s %6s %12.2f %14.2f %12.2f %7.2f" % (m.group(1), m.group(2), s, base, tv, s / tv))
EOF
	step "done"
	# (a lent machine returns few files: one archive)
	tar -czf "$out.tgz" -C "$out" . && echo "wrote $out.tgz"
}

# large times GCN and GraphSAGE (hidden 16) against PyTorch on a generated
# graph of NODES nodes and 10 edges per node: sancus's two runs each read
# the graph, PyTorch reads it once for both.
large() {
	local out=${1:?usage: gpu-host.sh large OUT NODES} nodes=${2:?usage: gpu-host.sh large OUT NODES}
	setup "$out" "" || return 1
	local g=/tmp/g$nodes
	step "gen: $nodes nodes"
	bin/sancus-cuda gen --out $g --nodes "$nodes" --edges $((10 * nodes)) --p-in 0.8 --feature-signal 0.5 --quiet >/dev/null || return 1
	local m
	for m in gcn sage; do
		step "sancus $m"
		timeout 150 bin/sancus-cuda train --data $g --device cuda --model $m --hidden 16 --epochs 20 --eval-every 0 --quiet \
			--out "$out/sancus-cuda-$m-16.json" >/dev/null 2>"$out/sancus-cuda-$m-16.err" || tail -3 "$out/sancus-cuda-$m-16.err"
		python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['result']; print('sancus %s: %.2f ms/epoch' % (sys.argv[2], r['mean_epoch_ms']))" \
			"$out/sancus-cuda-$m-16.json" $m
		[ $m = gcn ] || continue
		step "PyTorch gcn and sage"
		timeout 150 python3 kernels/cuda/torch_large.py "$g" 2>&1 | grep -v Warning | tee "$out/torch.txt"
	done
	step "done"
	tar -czf "$out.tgz" -C "$out" . && echo "wrote $out.tgz"
}

case ${1:-} in
pack) pack ;;
run) shift; run "$@" ;;
large) shift; large "$@" ;;
*) echo "usage: $0 pack | run OUT | large OUT NODES" >&2; exit 2 ;;

esac
