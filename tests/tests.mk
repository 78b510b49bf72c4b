# Tests.  `make test` runs the unit tests (cmocka, tests/unit/test_*.c),
# then the integration tests (pytest under Debian's python, tests/integration)
# that drive the real binaries under the real MPI runtime.

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(OBJ)/tests/%)
# Unit tests may use any non-entry object of the programs.
UNIT_LINK := $(common_o) $(common_mpi_o) $(filter-out $(OBJ)/master/main.o,$(master_o))
UNIT_TIMEOUT ?= 120

$(OBJ)/tests/test_%: tests/unit/test_%.c $(UNIT_LINK) $(plugin_so)
	@mkdir -p $(dir $@)
	$(MPICC) $(CPPFLAGS) $(CFLAGS) $(WARN) -Wno-missing-prototypes \
		-DFT_TEST_BINDIR='"$(abspath $(BINDIR))"' -DFT_TEST_SRCDIR='"$(abspath .)"' -o $@ $< $(UNIT_LINK) \
		$(EV_LIBS) $(HTTP_LIBS) $(LDLIBS) -lcmocka -ldl -lpthread

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do \
		echo "== $$t"; timeout $(UNIT_TIMEOUT) $$t; \
	done

integration: all
	timeout 900 /usr/bin/python3 -m pytest -q tests/integration $(PYTEST_ARGS)

# The MPICH build (static launch only) is tested beside the Open MPI one.
MPICH_BINDIR := build/mpich/bin

test: deps
	$(MAKE) all
	$(MAKE) MPI=mpich BINDIR=$(MPICH_BINDIR) all
	$(MAKE) unit
	$(MAKE) integration

deps:
	scripts/install-deps
