# Tests.  `make test` runs the unit tests (cmocka, tests/unit/test_*.c),
# then the integration tests (pytest under Debian's python, tests/integration)
# that drive the real binaries under the real MPI runtime.

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(OBJ)/tests/%)
# Unit tests may use any non-entry object of the programs.
UNIT_LINK := $(common_o) $(common_mpi_o) $(filter-out $(OBJ)/master/main.o,$(master_o))
UNIT_TIMEOUT ?= 120

# (A test sees the programs' structs: it is rebuilt when a header changes.)
$(OBJ)/tests/test_%: tests/unit/test_%.c $(wildcard tests/unit/*.h) \
		$(wildcard common/*.h master/*.h worker/*.h) $(UNIT_LINK) $(plugin_so)
	@mkdir -p $(dir $@)
	$(MPICC) $(CPPFLAGS) $(CFLAGS) $(WARN) -Wno-missing-prototypes \
		-DFT_TEST_BINDIR='"$(abspath $(BINDIR))"' -DFT_TEST_SRCDIR='"$(abspath .)"' -o $@ $< $(UNIT_LINK) \
		$(EV_LIBS) $(HTTP_LIBS) $(MUNGE_LIBS) $(LDLIBS) -lcmocka -ldl -lpthread

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do \
		echo "== $$t"; timeout $(UNIT_TIMEOUT) $$t; \
	done

# Integration tests run PYTEST_JOBS at a time (pytest-xdist): most of
# their time is spent waiting for deadlines, not computing.  The Slurm
# ones run after them, one at a time in pytest itself.
PYTEST_JOBS ?= 4

integration: all $(OBJ)/tests/agent_master
	timeout 900 /usr/bin/python3 -m pytest -q -n $(PYTEST_JOBS) -m "not slurm and not long" tests/integration $(PYTEST_ARGS)
	timeout 600 /usr/bin/python3 -m pytest -q -p no:xdist -m "slurm and not long" tests/integration $(PYTEST_ARGS)

# libFuzzer harnesses (clang) over the control request parser, the batch
# reader, the fast JSON reader (against jansson) and the greeting of
# control over TCP (rauth): `make fuzz` runs each for FUZZ_SECONDS (a short run is part of
# `make test`); `make fuzz FUZZ_SECONDS=3600` is the long run.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 20
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined
FUZZ_SRC := common/ctl.c common/jcheck.c common/jpos.c common/util.c \
	common/batch.c common/batchtext.c common/taskgraph.c common/plugins.c \
	common/statedir.c \
	common/proto.c common/wire.c common/jparse.c common/rauth.c \
	common/memsize.c common/outpath.c common/hostmem.c common/cgroup.c
FUZZ_BIN := $(OBJ)/fuzz/fuzz_request $(OBJ)/fuzz/fuzz_batch $(OBJ)/fuzz/fuzz_json \
	$(OBJ)/fuzz/fuzz_rauth

$(OBJ)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_SRC) $(wildcard common/*.h) \
		$(plugin_so)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) \
		-DFT_TEST_BINDIR='"$(abspath $(BINDIR))"' -o $@ $< $(FUZZ_SRC) \
		-ljansson -lm -ldl -lpthread

FUZZ_NAMES := request batch json rauth

# One target per harness, so that `make -j2 fuzz` runs two at a time.
fuzz: $(FUZZ_NAMES:%=fuzz-%)

fuzz-%: $(OBJ)/fuzz/fuzz_%
	@mkdir -p $(OBJ)/fuzz/corpus-$*
	@cp -n tests/fuzz/corpus/$*/* $(OBJ)/fuzz/corpus-$*/ || true
	@echo "== fuzz_$* ($(FUZZ_SECONDS) s)"
	@if timeout $$(( $(FUZZ_SECONDS) + 60 )) $(OBJ)/fuzz/fuzz_$* \
		-max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 -artifact_prefix=$(OBJ)/fuzz/ \
		$(OBJ)/fuzz/corpus-$* > $(OBJ)/fuzz/$*.log 2>&1; \
	then grep -E "^#[0-9]+ +DONE|exec_per_sec" $(OBJ)/fuzz/$*.log \
		| sed "s/^/fuzz_$*: /"; \
	else tail -40 $(OBJ)/fuzz/$*.log; exit 1; fi

# The MPICH build (static launch only) is tested beside the Open MPI one.
MPICH_BINDIR := build/mpich/bin

# The fuzzers' short run inside `make test` (four harnesses, two at a
# time): it keeps the whole of `make test` well under ten minutes on two
# cores.
TEST_FUZZ_SECONDS ?= 5

# The builds run two jobs at a time (the tests' and the fuzzers' too):
# from a clean checkout they were a quarter of the ten minutes make test
# may take.
test: deps
	$(MAKE) -j2 all
	$(MAKE) -j2 MPI=mpich BINDIR=$(MPICH_BINDIR) all
	$(MAKE) -j2 $(UNIT_BIN) $(FUZZ_BIN) $(OBJ)/tests/agent_master
	$(MAKE) unit
	$(MAKE) -j2 fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)
	$(MAKE) integration

# The long runs, before a release: 32 idle workers for a minute, a Slurm
# job's time limit (a minute at least) then the next job, the soak
# ten times longer (30,000 one-task batches, 200 batches of 10,000 tasks),
# 300,000 batches forgotten after retain_s 5 with the state dir, RSS and
# descriptors flat, and each fuzzer for ten minutes.
test-long: deps
	$(MAKE) all
	timeout 2400 /usr/bin/python3 -m pytest -q -p no:xdist -m long \
		-k "not retention_soak" tests/integration
	FTFARM_SOAK_SCALE=10 timeout 3600 /usr/bin/python3 -m pytest -q -s \
		tests/integration/test_daemon.py -k soak
	timeout 3600 /usr/bin/python3 -m pytest -q -s -p no:xdist -m long \
		tests/integration/test_retention.py -k retention_soak
	$(MAKE) -j2 fuzz FUZZ_SECONDS=600

deps:
	scripts/install-deps

# A stand-in master that drives one node agent through the protocol
# (tests/integration/test_agent.py runs it under mpirun).
$(OBJ)/tests/agent_master: tests/agent/agent_master.c $(common_o)
	@mkdir -p $(dir $@)
	$(MPICC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(common_o) $(LDLIBS)
