# sancus: full-graph GNN training on HPC clusters.
#
#   make run     install what is missing, generate a graph, shard it, train on 4 MPI ranks
#   make test    install what is missing, vet, run every test (also under mpirun -np 1, 2, 4
#                and as Slurm batch jobs on a local single-node cluster)
#   make test-short  the invariant tests only (go test -short ./...), in about a minute
#   make bench   kernel (GEMM against OpenBLAS, SpMM against the triad), epoch (against
#                PyTorch), communication and SANCUS benchmarks into results/bench/
#   make bench-scale  generated graphs from 100k/1M to 4M/40M nodes/edges at P = 1, 2

SHELL   := /bin/bash
GO      ?= go
BIN     := bin/sancus
NP      ?= 4
DATA    ?= data/planted-100k
SHARDS  ?= data/planted-100k-P$(NP)
EPOCHS  ?= 200

# As root, OpenMPI wants an explicit opt-in; small machines need
# --oversubscribe to place more ranks than cores.
MPIRUN_FLAGS ?= --oversubscribe $(shell [ "$$(id -u)" = 0 ] && echo --allow-run-as-root)
MPIRUN       ?= mpirun $(MPIRUN_FLAGS)

.PHONY: cuda test-cuda vet-cuda all deps torch build run test test-go test-short test-mpi test-slurm fuzz chaos vet bench bench-kernels bench-epoch bench-scale openblas bench-comm bench-messages bench-replay bench-emu-scaling bench-plan-vs-emulated bench-wire-choice bench-sancus bench-partition bench-memory bench-powerlaw bench-link bench-ab bench-models bench-hopgnn clean

all: build

# apt-get install, as root or through sudo, waiting out a held dpkg lock.
APT_INSTALL = SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	$$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	DEBIAN_FRONTEND=noninteractive $$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq

# Debian packages the build and the tests need (OpenMPI headers and launcher).
deps:
	@if ! command -v mpirun >/dev/null || ! [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h -o -e /usr/lib/aarch64-linux-gnu/openmpi/include/mpi.h ]; then \
		echo "installing OpenMPI (libopenmpi-dev openmpi-bin)"; \
		$(APT_INSTALL) libopenmpi-dev openmpi-bin; \
	fi
	@command -v g++ >/dev/null || { echo "installing g++ (the CUDA kernels' CPU emulation test)"; $(APT_INSTALL) g++; }

# sancus-report (the charts, behind `sancus report`) is built next to sancus.
build: deps
	$(GO) build -o $(BIN) ./src/cmd/sancus
	$(GO) build -o $(dir $(BIN))sancus-report ./src/cmd/sancus-report

$(DATA)/test.txt: | build
	$(BIN) gen --out $(DATA) --nodes 100000 --edges 1000000 --features 128 --classes 16 --seed 1

# Shards are prepared again when the shard format (src/shard/file.go) changes.
$(SHARDS)/meta.json: $(DATA)/test.txt src/shard/file.go
	$(BIN) prepare --data $(DATA) --parts $(NP) --out $(SHARDS)

# The main job: a real 4-rank SANCUS run (variation-gap staleness, ε_H = 0.03).
run: build $(SHARDS)/meta.json
	$(MPIRUN) -np $(NP) $(BIN) train --shards $(SHARDS) --epochs $(EPOCHS) \
		--staleness variation-gap --eps 0.03 --name planted-100k-P$(NP)-scsh

vet: deps
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# The engine talks to a Comm, never to MPI: it must build without libmpi.
	@if $(GO) list -deps -test ./src/train | grep -q 'sancus/collectives/mpi'; then \
		echo "src/train depends on the MPI transport"; exit 1; fi
	@# The ground floor: kernels import nothing of collectives (training setup names the codec).
	@if $(GO) list -deps ./kernels | grep -q 'sancus/collectives'; then \
		echo "kernels depends on collectives"; exit 1; fi
	@# Every rank runs sancus: gonum/plot's start-up (5.6 MB resident) stays in sancus-report.
	@if $(GO) list -deps ./src/cmd/sancus | grep -q 'gonum.org/v1/plot'; then \
		echo "src/cmd/sancus links gonum/plot: charts belong to sancus-report"; exit 1; fi
	@# The chart binary reads result JSONs: it links no engine, kernels or transport.
	@if $(GO) list -deps ./src/cmd/sancus-report | grep -E 'sancus/(kernels|collectives|src/train)'; then \
		echo "src/cmd/sancus-report links the packages above: it reads src/result only"; exit 1; fi
	@$(MAKE) --no-print-directory vet-cuda

# The cuda-tagged code type-checked on a host without the CUDA toolkit:
# kernels/cuda/vetstub declares the driver API and NCCL for cgo to read,
# and an empty PTX stands in for nvcc's (nothing is linked or run), so a
# change to a type the GPU code uses fails here, not on the GPU host.
vet-cuda:
	@ptx=kernels/cuda/sancus.ptx; made=; [ -e $$ptx ] || { : > $$ptx; made=1; }; \
	CGO_CFLAGS="-I$(CURDIR)/kernels/cuda/vetstub" $(GO) vet -tags cuda ./kernels/cuda ./collectives/nccl ./src/train ./src/cmd/sancus; \
	rc=$$?; [ -z "$$made" ] || rm -f $$ptx; exit $$rc

# OpenMPI makes its session directory, $TMPDIR/ompi.HOST.UID, with a
# check then a mkdir that fails when another mpirun makes it in between
# (open-mpi/ompi#8510): each suite that runs side by side with the others
# has a TMPDIR of its own, as each Go test package that starts mpirun does.
OMPI_OWN_TMP = d=$$(mktemp -d /tmp/sancus-$@-XXXXXX) && trap 'rm -rf "$$d"' EXIT && export TMPDIR="$$d" &&

# vet and the three suites run side by side, each one's output printed
# whole when it ends (any failure fails make test): the Slurm jobs and the
# MPI launches spend most of their time waiting, and the Go tests keep the
# cores busy meanwhile.
test: deps
	$(MAKE) --no-print-directory -j4 -O vet test-go test-mpi test-slurm

test-go: deps
	$(GO) test -count=1 -timeout 20m ./...
	@# Every input reader fuzzed for 1000 inputs (make fuzz: a minute each). A
	@# count, not seconds: a fuzz run bounded by time can fail at its end on
	@# a loaded machine with "context deadline exceeded" (golang/go#75804).
	$(MAKE) --no-print-directory fuzz FUZZTIME=1000x
	@# The kernels again at every lower instruction set this CPU has.
	for simd in avx2+fma baseline; do SANCUS_SIMD=$$simd $(GO) test -count=1 ./kernels || exit 1; done

# The fuzz targets of every reader of user input (text formats, .npy,
# .npz, model files, shard files and meta.json), FUZZTIME each.
FUZZ    := src/graph:FuzzMTX src/graph:FuzzSNAP src/graph:FuzzMETIS src/graph:FuzzNodeFiles src/graph:FuzzOGB \
	src/graph:FuzzNPY src/graph:FuzzNPZ src/model:FuzzModelFile src/shard:FuzzShardFile src/shard:FuzzShardMeta
FUZZTIME ?= 60s
fuzz:
	for t in $(FUZZ); do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./$${t%%:*} || exit 1; \
	done

# The invariant tier (P-equality, sparse = dense, resume, formats, errors):
# every package, no accuracy sweep over seeds and no long fault run.
test-short: vet
	$(GO) test -short -count=1 -timeout 5m ./...

# A real single-node Slurm: sbatch training, a requeue after SIGTERM, and a
# strong-scaling sweep with its CSV and plots (installs Slurm and munge).
test-slurm: build
	$(OMPI_OWN_TMP) bash slurm/test-local.sh

# The collectives again as real MPI jobs of 1, 2 and 4 ranks.
test-mpi: deps
	$(OMPI_OWN_TMP) for np in 1 2 4; do \
		$(GO) test -count=1 -timeout 10m -exec "$(MPIRUN) -np $$np" ./collectives/mpi/ || exit 1; \
	done

# The long fault-injection run: 24 faults (SIGKILL, SIGSTOP, SIGTERM, SIGINT
# to a random rank at a random epoch, SIGINT to mpirun) under mpirun and 6
# under the local Slurm, each recovered to weights bit-identical to an
# uninterrupted run; logs in results/chaos/. make test runs the short form
# (5 under mpirun, 1 under Slurm).
chaos: build
	@mkdir -p results/chaos
	SANCUS_CHAOS=24 SANCUS_CHAOS_LOG=$(CURDIR)/results/chaos/mpirun.log $(GO) test -count=1 -timeout 30m -run TestFaultInjection -v ./src/cmd/sancus
	bash slurm/chaos-slurm.sh 6 results/chaos/slurm.log

bench: bench-kernels bench-epoch bench-comm bench-messages bench-replay bench-emu-scaling bench-wire-choice bench-sancus bench-partition

# The GEMM table sets OpenBLAS's sgemm next to every shape: Debian's
# libopenblas-dev, linked into a benchmark build of its own (-tags openblas).
openblas:
	@if ! [ -e /usr/include/x86_64-linux-gnu/cblas.h -o -e /usr/include/cblas.h -o -e /usr/include/aarch64-linux-gnu/cblas.h ]; then \
		echo "installing OpenBLAS (libopenblas-dev)"; \
		$(APT_INSTALL) libopenblas-dev; \
	fi

# The epoch table sets plain PyTorch next to sancus: Debian's python3-torch
# (CPU, no torch_geometric), which slurm/bench/torch_gnn.py needs and no more.
torch:
	@if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
		echo "installing PyTorch (python3-torch)"; \
		$(APT_INSTALL) python3-torch; \
	fi

# The epoch figures: P = 1, 2, 4 against plain PyTorch, variation-gap
# against none, hidden 256 × 3 layers with its GEMM/SpMM/communication
# shares, peak RSS against compulsory bytes (train and prepare).
bench-epoch: build torch $(DATA)/test.txt
	bash slurm/bench/epoch-bench.sh $(DATA) results/bench/epoch "$(MPIRUN)"

# Graphs from 100k/1M to 4M/40M nodes/edges, 10 epochs at P = 1 and 2.
bench-scale: build
	bash slurm/bench/scale-bench.sh data/scale results/bench/scale "$(MPIRUN)"

# The pre-training memory estimate against peak RSS: a 1M-node graph (GCN,
# GraphSAGE, GAT at hidden 16 and 256, P = 1, 2) and a products-shaped one
# (3-layer GCN-256 at P = 1, 2, 4, with sancus plan's prediction).
bench-memory: build
	bash slurm/bench/memory-bench.sh data/memory results/memory "$(MPIRUN)"

# The epoch time of this tree against revision OLD (default: HEAD~1), the
# two binaries taking turns on the 100k graph: GCN, GraphSAGE and GAT at
# P = 1 and 2 (a refactor must not be slower).
OLD ?= HEAD~1
bench-ab: build $(DATA)/test.txt
	MODELS=$$'gcn|--model gcn --epochs 60\nsage|--model sage --epochs 40\ngat|--model gat --hidden 8 --heads 8 --epochs 6' \
		bash slurm/bench/compare-revisions.sh $(OLD) $(DATA) results/bench/ab "$(MPIRUN)" 30 3

bench-kernels: build openblas
	$(GO) build -tags openblas -o bin/sancus-openblas ./src/cmd/sancus
	bin/sancus-openblas bench kernels --out results/bench/kernels.json | tee results/bench/kernels.txt
	$(GO) test -run '^$$' -bench . -benchtime 20x ./kernels | tee results/bench/kernels-go.txt

bench-comm: build
	for np in 2 4; do \
		$(MPIRUN) -np $$np $(BIN) bench comm --out results/bench/comm-P$$np.json | tee results/bench/comm-P$$np.txt || exit 1; \
	done

# One rank replayed alone at P = 64, 256, 512 on a 1M-node graph, next to
# what sancus plan predicts for it (results/scaling/).
bench-replay: build
	bash slurm/bench/replay.sh

# Epoch times over emulated nodes (root: ip netns, tc): P = 2, 4, 8 on 2 and
# 4 nodes, 1 Gbit/s and uncapped, fp32 and the chosen wire, 3 runs each;
# NODES, PS, RATES, WIRES, RUNS, EPOCHS narrow it.
bench-emu-scaling: build
	bash slurm/bench/emu-scaling.sh results/scaling/emulated.tsv

# sancus plan's epoch beside the measured one over emulated nodes (root: ip
# netns, tc): P = 2, 4, 8 on 2 and 4 nodes, 1 Gbit/s and uncapped, fp32, 3
# rounds, each calibrating plan's rates and probing the links first.
bench-plan-vs-emulated: build
	bash slurm/bench/plan-vs-emulated.sh results/scaling/plan-vs-emulated.tsv

# The wire chosen over 2 emulated nodes, 5 runs a rate, beside two busy loops.
bench-wire-choice: build
	bash slurm/bench/emu-wire-choice.sh results/scaling/wire-choice.tsv

# Many small messages, one by one against batched (P = 2 and 8), and a
# rank's P block products against one product over the same nonzeros.
bench-messages: build
	@mkdir -p results/bench
	{ for np in 2 8; do $(MPIRUN) -np $$np $(BIN) bench comm --max-mib 1 | grep 'messages of' || exit 1; done; \
	  $(GO) test -run XXX -bench BlockProducts -benchtime 1x ./src/train/ | grep 'P ='; } | tee results/bench/messages.txt

# Every staleness policy at P = 2 and 4 on the reference graph.
bench-sancus: build $(DATA)/test.txt
	bash slurm/bench/staleness-local.sh $(DATA) results/bench/sancus "$(MPIRUN)"

# Partitioners against METIS (Debian's metis package) on the shared graphs.
bench-partition: build
	@command -v gpmetis >/dev/null || { $(APT_INSTALL) metis; }
	bash slurm/bench/partition-bench.sh results/bench/partition

# ByteGNN's partitioner at P = 4 on the 100k products-like graph and Cora:
# each split's balance, edge cut, share of sampled neighbours local.
.PHONY: bench-bytegnn
bench-bytegnn: build
	@command -v gpmetis >/dev/null || { $(APT_INSTALL) metis; }
	bash slurm/bench/bytegnn-bench.sh results/bench/bytegnn

# Time to accuracy on emulated links (root: ip netns, tc): by default the
# whole table, every rate, P = 2 and 4 and all three models (hours on a
# 2-core machine); RATES, PS, MODELS, CONFIGS, TURNS, EPOCHS, LR narrow
# it, as slurm/bench/link-bench.sh reads them.
RATES ?= 500mbit 1gbit 2500mbit 10gbit none
PS ?= 2 4
MODELS ?= gcn sage gat
bench-link: build
	RATES="$(RATES)" PS="$(PS)" MODELS="$(MODELS)" bash slurm/bench/link-bench.sh results/bench/link

# Every model in one process and at P = 2 next to plain PyTorch, to its
# memory-bound time (compulsory bytes over the triad) and to its roofline
# (per class, bytes over the triad or flops over the GEMM peak), on the 100k graph
# with 60% training rows and on the same graph with 10% (make's, into t10/),
# taking turns (ROUNDS, EPOCHS as the script reads).
bench-models: build torch openblas $(DATA)/test.txt
	$(GO) build -tags openblas -o bin/sancus-openblas ./src/cmd/sancus
	bash slurm/bench/models-vs-torch.sh results/bench/models "$(MPIRUN)" $(or $(ROUNDS),3)
	DATA=$(DATA) bash slurm/bench/models-vs-torch.sh results/bench/models/t10 "$(MPIRUN)" $(or $(ROUNDS),3)

# Sampled mini-batches against full-graph training: GraphSAGE's accuracy on
# Cora, and a GCN's epoch, bytes and feature rows at P = 4 (NODES, EPOCHS).
# Every strategy on the same graph and shards (full-graph, cluster-batch,
# sampled in turn and ahead) over 2 emulated nodes, uncapped and at
# 1 Gbit/s (root: ip netns, tc); PS, RATES, FULL_EPOCHS, SAMPLED_EPOCHS,
# MIGRATE narrow or widen it as slurm/bench/strategies.sh reads them.
.PHONY: bench-strategies
bench-strategies: build
	bash slurm/bench/strategies.sh results/bench/strategies

.PHONY: bench-sampled
bench-sampled: build
	MPIRUN="$(MPIRUN)" bash slurm/bench/sampled-bench.sh results/bench/sampled

# HopGNN: the model moved to the micrographs against the features moved:
# feature, model and sampling bytes on the 100k products-like graph at its
# own homophily and at 0.95 (HopGNN's locality), GREM and METIS-like, P = 4.
bench-hopgnn: build
	bash slurm/bench/hopgnn-bench.sh results/bench/hopgnn

# HopGNN's model migration against both feature-moving draws: test
# accuracy over three seeds, after 2 and after 10 epochs (after 3 on the
# graph drawn with homophily 0.95).
.PHONY: bench-hopgnn-accuracy
bench-hopgnn-accuracy: build
	EPOCHS=2 bash slurm/bench/hopgnn-accuracy.sh results/bench/hopgnn
	EPOCHS=10 bash slurm/bench/hopgnn-accuracy.sh results/bench/hopgnn
	HOMOPHILY=0.95 EPOCHS=3 bash slurm/bench/hopgnn-accuracy.sh results/bench/hopgnn

# HopGNN's time to accuracy against both feature-moving draws, features
# 128 wide, P = 4 over 2 emulated nodes at 1 Gbit/s, the modes taking
# turns (root: ip netns, tc; RATE, ROUNDS, EPOCHS, BASE as the script
# reads them).
.PHONY: bench-hopgnn-time
bench-hopgnn-time: build
	bash slurm/bench/hopgnn-time.sh results/bench/hopgnn

# Graphs shaped like the real ones: replication factors, balance by
# nonzeros, each partitioner's bytes and accuracy on the arxiv-like graph.
bench-powerlaw: build
	@command -v gpmetis >/dev/null || { $(APT_INSTALL) metis; }
	bash slurm/bench/powerlaw-bench.sh results/bench/powerlaw

clean:
	rm -rf bin

# GPU build, on a host with the CUDA toolkit (CUDA_HOME) and NCCL (NCCL_HOME,
# default: the nvidia-nccl wheel of the python3 on PATH). The default build
# never needs either.
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /opt/cuda))
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= compute_80
NCCL_HOME ?= $(shell python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null)
NCCL_LINK := $(CURDIR)/bin/nccl-link
CUDA_ENV   = CGO_CFLAGS="-I$(CUDA_HOME)/include $(if $(NCCL_HOME),-I$(NCCL_HOME)/include) $(CGO_CFLAGS)" \
	CGO_LDFLAGS="-L$(CUDA_HOME)/lib64/stubs -L$(CUDA_HOME)/targets/x86_64-linux/lib/stubs -L$(NCCL_LINK) $(if $(NCCL_HOME),-Wl$(comma)-rpath$(comma)$(NCCL_HOME)/lib) $(CGO_LDFLAGS)"
comma := ,

kernels/cuda/sancus.ptx: kernels/cuda/sancus.cu
	@test -x "$(NVCC)" || { echo "make cuda: no nvcc (set CUDA_HOME)"; exit 1; }
	$(NVCC) -O3 -arch=$(CUDA_ARCH) -ptx -o $@ $<

# NCCL wheels ship libnccl.so.2 only: give the linker its plain name.
$(NCCL_LINK)/libnccl.so:
	@mkdir -p $(NCCL_LINK)
	@if [ -n "$(NCCL_HOME)" ]; then ln -sf $(NCCL_HOME)/lib/libnccl.so.2 $@; else touch $@.missing; fi

cuda: kernels/cuda/sancus.ptx $(NCCL_LINK)/libnccl.so
	$(CUDA_ENV) $(GO) build -tags cuda -o bin/sancus-cuda ./src/cmd/sancus

# The GPU checks: every kernel against the CPU, NCCL collectives, and whole
# training runs whose losses must match the CPU's to 1e-4.
test-cuda: kernels/cuda/sancus.ptx $(NCCL_LINK)/libnccl.so
	@# (both run: a failing package does not hide the other's results)
	$(CUDA_ENV) $(GO) test -tags cuda -count=1 -v ./kernels/cuda ./collectives/nccl; k=$$?; \
	$(CUDA_ENV) $(GO) test -tags cuda -count=1 -v -run CUDA -timeout 20m ./src/train && exit $$k
