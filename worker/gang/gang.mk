# Gang tasks: the rank program (ftfarm-gang) and the gang plugins
# (bin/gangs/).
#
# Included by the main Makefile (its variables and pattern rules are used):
# `make` builds the programs and plugins, `make unit` runs the gang unit
# tests.

GANG_DIR := worker/gang
GANG_CPPFLAGS := -iquote $(GANG_DIR)

# The runtime every rank links, and what the master side shares with it.
GANG_RT := $(GANG_DIR)/gang.c $(GANG_DIR)/gang_req.c
GANG_SHARED := $(GANG_DIR)/gang_proto.c $(GANG_DIR)/gang_load.c
GANG_COMMON := common/wire.c common/util.c common/jcheck.c common/jpos.c

gang_rt_o := $(GANG_RT:%.c=$(OBJ)/%.o) $(OBJ)/$(GANG_DIR)/main.o
gang_shared_o := $(GANG_SHARED:%.c=$(OBJ)/%.o)
gang_common_o := $(GANG_COMMON:%.c=$(OBJ)/%.o)

$(gang_rt_o) $(gang_shared_o): CC := $(MPICC)
$(gang_rt_o) $(gang_shared_o): CPPFLAGS += $(GANG_CPPFLAGS)
# The master runs gangs (master/gangs.c) and the CLI checks gang jobs.
$(master_o) $(cli_o): CPPFLAGS += $(GANG_CPPFLAGS)
$(BINDIR)/ftfarm-master: $(gang_shared_o)
$(BINDIR)/ftfarm: $(OBJ)/$(GANG_DIR)/gang_load.o
UNIT_LINK += $(gang_shared_o)
$(UNIT_BIN): $(gang_shared_o)

# The rank program exports the runtime to the plugins it loads.
$(BINDIR)/ftfarm-gang: $(gang_rt_o) $(gang_shared_o) $(gang_common_o)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -rdynamic -o $@ $^ $(LDLIBS) -ldl

# Plugins: compiled with the MPI wrapper (they call MPI), with the small
# pieces of common/ and the gang data helpers they use; their sums must be
# the stated order's bits, so nothing is fused or reassociated.
GANG_PLUGIN_COMMON := common/jcheck.c common/jpos.c common/util.c \
	$(GANG_DIR)/gang_check.c $(GANG_DIR)/gang_data.c
GANG_PLUGIN_FLAGS := $(CPPFLAGS) $(GANG_CPPFLAGS) $(CFLAGS) -fno-fast-math \
	-ffp-contract=off $(WARN) $(PLUGIN_CFLAGS)
GANG_PLUGIN_HDRS := $(wildcard $(GANG_DIR)/*.h)

FTAR_SRC := $(GANG_DIR)/ftallreduce.c $(GANG_DIR)/ftar_plan.c \
	$(GANG_DIR)/ftar_job.c
PIPE_SRC := $(GANG_DIR)/pipeline.c $(GANG_DIR)/pipe_route.c \
	$(GANG_DIR)/pipe_job.c

$(BINDIR)/gangs/ftallreduce.so: $(FTAR_SRC) $(GANG_PLUGIN_COMMON) $(GANG_PLUGIN_HDRS)
	@mkdir -p $(dir $@)
	$(MPICC) $(GANG_PLUGIN_FLAGS) -o $@ $(FTAR_SRC) $(GANG_PLUGIN_COMMON) $(LDLIBS)

$(BINDIR)/gangs/pipeline.so: $(PIPE_SRC) $(GANG_PLUGIN_COMMON) $(GANG_PLUGIN_HDRS)
	@mkdir -p $(dir $@)
	$(MPICC) $(GANG_PLUGIN_FLAGS) -o $@ $(PIPE_SRC) $(GANG_PLUGIN_COMMON) $(LDLIBS)

# Unit tests of the pure parts (no MPI at run time).
GANG_UNIT := $(OBJ)/tests/test_ftar_plan
$(OBJ)/tests/test_ftar_plan: tests/gang/test_ftar_plan.c $(GANG_DIR)/ftar_plan.c common/util.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(GANG_CPPFLAGS) $(CFLAGS) $(WARN) \
		-Wno-missing-prototypes -o $@ $^ $(LDLIBS) -lcmocka

GANG_PROGRAMS := $(BINDIR)/ftfarm-gang $(BINDIR)/gangs/ftallreduce.so \
	$(BINDIR)/gangs/pipeline.so
GANG_ALL := $(GANG_PROGRAMS) $(GANG_UNIT)
all: $(GANG_PROGRAMS)
unit: gang-unit

.PHONY: gang gang-unit
gang: $(GANG_ALL)

gang-unit: $(GANG_UNIT)
	timeout 60 $(GANG_UNIT)
