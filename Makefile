# ftfarm build.  `make` builds against Open MPI (Debian 12's default MPI that
# can spawn processes); `make MPI=mpich` builds against MPICH.  Objects go to
# build/$(MPI)/, programs and task plugins to $(BINDIR) (bin/ by default).

MPI ?= openmpi
ifeq ($(MPI),openmpi)
MPICC ?= mpicc.openmpi
MPIEXEC ?= mpirun.openmpi
# libev exports libevent-compatible names (event_add, ...).  Open MPI calls
# the real libevent by those names, so libevent must come first in the
# master's symbol lookup order or Open MPI crashes inside libev at MPI_Init.
EV_LIBS := -Wl,--no-as-needed -levent_core -Wl,--as-needed -lev
else ifeq ($(MPI),mpich)
MPICC ?= mpicc.mpich
MPIEXEC ?= mpiexec.mpich
EV_LIBS := -lev
else
$(error MPI must be openmpi or mpich, not $(MPI))
endif

CC ?= cc
BINDIR ?= bin
OBJ := build/$(MPI)
OPT ?= -O2
CFLAGS ?= $(OPT) -g
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CPPFLAGS := -std=c11 -D_GNU_SOURCE -iquote common -iquote master -iquote worker -iquote cli \
	-DFT_MPI_FLAVOR='"$(MPI)"' -DFT_MPIEXEC='"$(MPIEXEC)"'
LDLIBS := -ljansson -lm
# libmicrohttpd: the master's HTTP listener (master/http.c).
HTTP_LIBS := -lmicrohttpd
# libmunge: control clients over TCP prove who they are (master/remote.c,
# cli/remote.c).
MUNGE_LIBS := -lmunge
PLUGIN_CFLAGS := -fPIC -shared

# Code without MPI: shared by the CLI, master, worker and plugins.
COMMON := common/jpos.c common/jcheck.c common/config.c common/log.c \
	common/wire.c common/plugins.c common/batch.c \
	common/util.c common/ctl.c common/proto.c common/jsonl.c \
	common/batchtext.c common/statedir.c common/crc32c.c common/lease.c \
	common/progress.c common/hosts.c common/slurm.c common/jparse.c \
	common/rauth.c common/frame.c common/hugeheap.c common/taskgraph.c \
	common/memsize.c common/outpath.c common/cgroup.c common/hostmem.c
# Code that calls MPI.
COMMON_MPI := common/treq.c
MASTER := master/main.c master/loop.c master/farm.c master/commands.c \
	master/control.c master/health.c master/registry.c master/batches.c \
	master/jobs.c master/intake.c master/agents.c master/link.c master/link_mpi.c master/link_tcp.c master/spawn.c \
	master/worker.c master/node.c master/sched.c master/sched_queue.c master/sched_place.c \
	master/sched_inst.c master/events.c \
	master/defer.c master/store.c master/journal.c master/fence.c \
	master/blame.c master/ladder.c master/bmc.c master/child.c \
	master/stats.c master/subs.c master/evring.c \
	master/http.c master/metrics.c master/expo.c master/page.c \
	master/gangs.c master/grun.c master/pidwatch.c master/remote.c master/join.c master/alloc.c master/aplan.c \
	master/mdecode.c master/parked.c \
	master/adds.c master/openb.c master/retain.c master/cancel.c master/deps.c master/inputs.c master/opstate.c master/reaper.c \
	master/replay.c
WORKER := worker/main.c worker/agent_mpi.c worker/agent.c worker/doze.c worker/slots.c \
	worker/slotproc.c worker/memcg.c
# ftfarm-agent, the agent of a node that joins over TCP (ftfarm join):
# no MPI; it shares the agent's core and the slots with ftfarm-worker.
AGENT := worker/agent_main.c worker/agent_tcp.c
AGENT_SHARED := worker/agent.c worker/slots.c worker/slotproc.c \
	worker/memcg.c
# ftfarm-slot, a node's worker slot: no MPI, compiled with cc.
SLOT := worker/slot_main.c worker/slot.c worker/runner.c worker/zygote.c \
	worker/memcg.c worker/outfiles.c
# Reaching a master over TCP with MUNGE: the CLI and a joining agent
# (they link libmunge; the other programs do not).
RDIAL := common/rdial.c
CLI := cli/main.c cli/err.c cli/commands.c cli/start.c cli/launch.c cli/supervise.c \
	cli/nodes.c cli/watch.c cli/events.c cli/progress.c cli/tasks.c cli/remote.c \
	cli/down.c cli/join.c cli/alloc.c
PLUGINS := exec sleep wordcount relax python

common_o = $(COMMON:%.c=$(OBJ)/%.o)
common_mpi_o = $(COMMON_MPI:%.c=$(OBJ)/%.o)
master_o = $(MASTER:%.c=$(OBJ)/%.o)
worker_o = $(WORKER:%.c=$(OBJ)/%.o)
slot_o = $(SLOT:%.c=$(OBJ)/%.o)
agent_o = $(AGENT:%.c=$(OBJ)/%.o) $(AGENT_SHARED:%.c=$(OBJ)/%.o)
cli_o = $(CLI:%.c=$(OBJ)/%.o)
rdial_o = $(RDIAL:%.c=$(OBJ)/%.o)
plugin_so = $(PLUGINS:%=$(BINDIR)/tasks/%.so)

PROGRAMS := $(BINDIR)/ftfarm-master $(BINDIR)/ftfarm-worker $(BINDIR)/ftfarm-slot \
	$(BINDIR)/ftfarm-agent \
	$(BINDIR)/ftfarm

.PHONY: all clean test unit integration demo deps bench fuzz lint test-long \
	install uninstall
all: $(PROGRAMS) $(plugin_so)

$(OBJ)/common/treq.o $(master_o) $(worker_o): CC := $(MPICC)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -MMD -MP -c $< -o $@

$(BINDIR)/ftfarm-master: $(master_o) $(common_mpi_o) $(common_o)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -o $@ $^ $(EV_LIBS) $(HTTP_LIBS) $(MUNGE_LIBS) $(LDLIBS) -ldl -lpthread

# The status page is assembled into the master (.incbin in page.c).
$(OBJ)/master/page.o: master/page.html

$(BINDIR)/ftfarm-worker: $(worker_o) $(common_o)
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -o $@ $^ $(LDLIBS) -ldl -lpthread

# Bound at load (-z now): the node's zygote resolves every symbol once,
# and the slots it forks inherit them instead of each resolving (and
# copying the pages of) what it calls first.
$(BINDIR)/ftfarm-slot: $(slot_o) $(common_o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wl,-z,now -o $@ $^ $(LDLIBS) -ldl -lpthread

$(BINDIR)/ftfarm-agent: $(agent_o) $(rdial_o) $(common_o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(MUNGE_LIBS) $(LDLIBS) -ldl -lpthread

$(BINDIR)/ftfarm: $(cli_o) $(rdial_o) $(common_o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(MUNGE_LIBS) $(LDLIBS) -ldl -lpthread

# Plugins link the small pieces of common/ they use into themselves (and
# are rebuilt when a header of common/, the ABI among them, changes).
PLUGIN_COMMON := common/jcheck.c common/jpos.c common/util.c
PLUGIN_DEPS := $(PLUGIN_COMMON) $(wildcard common/*.h)
$(BINDIR)/tasks/%.so: worker/tasks/%.c $(PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(PLUGIN_CFLAGS) -o $@ $< $(PLUGIN_COMMON) $(LDLIBS)

# exec and python start processes: with the environment task_env.c
# makes, their outputs read by task_io.c, their memory sampled by
# task_mem.c.
TASK_PROC := worker/tasks/task_env.c worker/tasks/task_io.c \
	worker/tasks/task_mem.c
$(BINDIR)/tasks/exec.so $(BINDIR)/tasks/python.so: $(BINDIR)/tasks/%.so: \
		worker/tasks/%.c $(TASK_PROC) $(TASK_PROC:.c=.h) $(PLUGIN_DEPS) \
		common/memsize.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -iquote worker/tasks $(CFLAGS) $(WARN) $(PLUGIN_CFLAGS) -o $@ $< $(TASK_PROC) common/memsize.c $(PLUGIN_COMMON) $(LDLIBS)

# wordcount is split into worker/tasks/wc_*.c, compiled into its plugin.
# Its map runs a few short loops billions of times: on x86 CPUs with the
# jump-erratum microcode (Skylake to Cascade Lake) a branch that crosses or
# ends at a 32-byte boundary leaves the uop cache, so where the linker puts
# a loop moved the map's time by 3-4 %; the assembler keeps branches off
# those boundaries when it can (GNU as 2.34 on).
WORDCOUNT_SRC := worker/tasks/wordcount.c $(wildcard worker/tasks/wc_*.c) \
	worker/tasks/task_keep.c
WC_ASFLAGS := $(shell $(CC) -Wa,-mbranches-within-32B-boundaries -x c -c \
	/dev/null -o /dev/null 2>/dev/null && echo -Wa,-mbranches-within-32B-boundaries)
$(BINDIR)/tasks/wordcount.so: $(WORDCOUNT_SRC) $(wildcard worker/tasks/wc_*.h) \
		worker/tasks/task_keep.h $(PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -iquote worker/tasks $(CFLAGS) $(WC_ASFLAGS) $(WARN) $(PLUGIN_CFLAGS) -o $@ $(WORDCOUNT_SRC) $(PLUGIN_COMMON) $(LDLIBS)

# relax is split into worker/tasks/relax_*.c, compiled into its plugin.
# Results must be the seed's bits: nothing fused or reassociated, whatever
# CFLAGS says.
RELAX_SRC := worker/tasks/relax.c $(wildcard worker/tasks/relax_*.c) \
	worker/tasks/task_keep.c
$(BINDIR)/tasks/relax.so: $(RELAX_SRC) $(wildcard worker/tasks/relax_*.h) \
		worker/tasks/task_keep.h $(PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -iquote worker/tasks $(CFLAGS) -fno-fast-math -ffp-contract=off $(WARN) $(PLUGIN_CFLAGS) -o $@ $(RELAX_SRC) $(PLUGIN_COMMON) $(LDLIBS)

-include $(shell find build -name '*.d' 2>/dev/null)

include tests/tests.mk
# Gang tasks: the rank program ftfarm-gang, the gang plugins (bin/gangs/)
# and the pieces the master and the CLI share with them.
include worker/gang/gang.mk
# Manual pages (install-man, uninstall-man).
include man/man.mk

# The main job: a local cluster doing real work (see scripts/demo).
demo: deps
	$(MAKE) all
	scripts/demo

# `make install PREFIX=/usr/local DESTDIR=`: the programs in bin (the
# master, worker and gang runtime beside ftfarm, which starts them from its
# own directory), the task and gang plugins in lib/ftfarm/{tasks,gangs}
# (found from bin), the example configs (and a Snakemake workflow) in
# share/ftfarm/examples with the BMC simulator they name in
# share/ftfarm/scripts, the bash completion in
# share/bash-completion/completions/ftfarm, the sbatch script in
# share/ftfarm, the Snakemake profile in share/ftfarm/snakemake/ftfarm
# (its scripts find bin/ftfarm from there), the user documentation in
# share/doc/ftfarm, the Python package (every .py file of python/ftfarm) in
# lib/python3/dist-packages/ftfarm.  Every host of a cluster needs the same
# PREFIX (or a shared file system).  `make uninstall` removes exactly these
# files, the package's compiled forms Python left in __pycache__, and the
# directories left empty.
PREFIX ?= /usr/local
DESTDIR ?=
I_ROOT = $(DESTDIR)$(PREFIX)
I_BIN := ftfarm ftfarm-master ftfarm-worker ftfarm-slot ftfarm-agent ftfarm-gang
I_TASKS := $(PLUGINS:%=%.so)
I_GANGS := ftallreduce.so pipeline.so
I_EXAMPLES := $(notdir $(wildcard config/*.json)) bmc-password workflow.smk
I_DOCS := $(notdir $(wildcard docs/*.md))
I_PY := $(notdir $(wildcard python/ftfarm/*.py))
I_PYDIR := lib/python3/dist-packages/ftfarm
I_SMK := share/ftfarm/snakemake/ftfarm
I_SMK_EXE := ftfarm-submit.py ftfarm-status.sh ftfarm-cancel.py
I_SMK_DATA := config.yaml ftfarm_profile.py
I_COMP := share/bash-completion/completions
I_DIRS := $(I_COMP) share/bash-completion lib/ftfarm/tasks lib/ftfarm/gangs lib/ftfarm share/ftfarm/examples \
	share/ftfarm/scripts $(I_SMK)/__pycache__ $(I_SMK) \
	share/ftfarm/snakemake share/ftfarm share/doc/ftfarm \
	$(I_PYDIR)/__pycache__ $(I_PYDIR) lib/python3/dist-packages lib/python3
install: all
	install -d $(I_ROOT)/bin $(I_ROOT)/lib/ftfarm/tasks \
		$(I_ROOT)/lib/ftfarm/gangs $(I_ROOT)/share/ftfarm/examples \
		$(I_ROOT)/share/ftfarm/scripts $(I_ROOT)/share/doc/ftfarm \
		$(I_ROOT)/$(I_PYDIR) $(I_ROOT)/$(I_SMK) $(I_ROOT)/$(I_COMP)
	install -m 755 $(I_BIN:%=$(BINDIR)/%) $(I_ROOT)/bin/
	install -m 644 scripts/completion/ftfarm $(I_ROOT)/$(I_COMP)/ftfarm
	install -m 644 $(I_TASKS:%=$(BINDIR)/tasks/%) $(I_ROOT)/lib/ftfarm/tasks/
	install -m 644 $(I_GANGS:%=$(BINDIR)/gangs/%) $(I_ROOT)/lib/ftfarm/gangs/
	install -m 644 $(I_EXAMPLES:%=config/%) $(I_ROOT)/share/ftfarm/examples/
	install -m 755 scripts/bmc-sim $(I_ROOT)/share/ftfarm/scripts/
	install -m 755 scripts/ftfarm.sbatch $(I_ROOT)/share/ftfarm/
	install -m 755 $(I_SMK_EXE:%=scripts/snakemake/ftfarm/%) $(I_ROOT)/$(I_SMK)/
	install -m 644 $(I_SMK_DATA:%=scripts/snakemake/ftfarm/%) $(I_ROOT)/$(I_SMK)/
	$(if $(I_DOCS),install -m 644 $(I_DOCS:%=docs/%) $(I_ROOT)/share/doc/ftfarm/)
	install -m 644 $(I_PY:%=python/ftfarm/%) $(I_ROOT)/$(I_PYDIR)/

uninstall:
	rm -f $(I_BIN:%=$(I_ROOT)/bin/%) \
		$(I_TASKS:%=$(I_ROOT)/lib/ftfarm/tasks/%) \
		$(I_GANGS:%=$(I_ROOT)/lib/ftfarm/gangs/%) \
		$(I_EXAMPLES:%=$(I_ROOT)/share/ftfarm/examples/%) \
		$(I_ROOT)/share/ftfarm/scripts/bmc-sim \
		$(I_ROOT)/share/ftfarm/ftfarm.sbatch \
		$(I_ROOT)/$(I_COMP)/ftfarm \
		$(I_SMK_EXE:%=$(I_ROOT)/$(I_SMK)/%) \
		$(I_SMK_DATA:%=$(I_ROOT)/$(I_SMK)/%) \
		$(wildcard $(I_ROOT)/$(I_SMK)/__pycache__/ftfarm_profile.*.pyc) \
		$(I_DOCS:%=$(I_ROOT)/share/doc/ftfarm/%) \
		$(I_PY:%=$(I_ROOT)/$(I_PYDIR)/%) \
		$(foreach m,$(I_PY:.py=),$(wildcard $(I_ROOT)/$(I_PYDIR)/__pycache__/$(m).*.pyc))
	-rmdir $(I_DIRS:%=$(I_ROOT)/%) 2>/dev/null || true

clean:
	rm -rf build bin
