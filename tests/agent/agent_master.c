/*
 * agent_master: a small stand-in for ftfarm-master that drives one node
 * agent (bin/ftfarm-worker) through the protocol of proto.h, under
 * `mpirun -n 1` (or, with AGENT_MASTER_STATIC set, as rank 0 of a static
 * world whose rank 1 is the agent).
 *
 *   agent_master BINDIR check   slots 0..3: results exactly once, a slot
 *                               killed by its task, one SIGSTOPped, one
 *                               killed by KILL, a respawn, ping, stop
 *   agent_master BINDIR start N N slots: time from SPAWN to the Nth
 *                               HELLO, PSS of one slot, stop
 *   agent_master BINDIR noslot  BINDIR without ftfarm-slot: a SPAWN is
 *                               answered by EXITED
 *   agent_master BINDIR nohello BINDIR with an ftfarm-slot that never
 *                               says hello: killed, reported hung
 *
 * Prints what it measured; exits 0 only when every check held.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "proto.h"
#include "util.h"

#define HB 1.0			/* heartbeat given to the agent */
#define PING_TIMEOUT 0.5
#define WAIT 20.0		/* seconds any step may take */
#define PER_SLOT 100		/* tasks per slot, half of them exec */
#define ALL (4 * PER_SLOT)

struct ent {
	uint32_t slot, gen, tag;
	char *p;
	size_t n;
	double t;
};

static MPI_Comm ic;
static int peer;			/* the agent's rank in ic */
static char *rbuf;
static struct ent *ents;
static size_t nents, capents;
static int agent_bye, agent_pong;
static pid_t agent_pid;
static uint32_t pong_queued;
static int failures;

#define CHECK(c, ...) do { if (!(c)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void
fatal(const char *why)
{
	fprintf(stderr, "agent_master: %s\n", why);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void
add_ent(const struct proto_relay *r)
{
	if (nents == capents) {
		capents = capents ? capents * 2 : 256;
		ents = ft_realloc(ents, capents * sizeof(*ents));
	}
	ents[nents].slot = r->slot;
	ents[nents].gen = r->gen;
	ents[nents].tag = r->tag;
	ents[nents].p = ft_malloc(r->n + 1);
	memcpy(ents[nents].p, r->p, r->n);
	ents[nents].n = r->n;
	ents[nents].t = ft_now();
	nents++;
}

static void send_msg(int tag, struct ft_buf *b);

/* Ping the agent each second, as a master does (it leaves when its
 * master falls silent). */
static void
keep_alive(void)
{
	static double last;
	struct ft_buf b = { 0 };

	if (ft_now() - last < 1.0)
		return;
	last = ft_now();
	proto_put_ping(&b, 1);
	send_msg(FT_MSG_PING, &b);
}

/* Take one message if one came.  Returns 1 if one did. */
static int
pump(void)
{
	MPI_Status st;
	int flag = 0, count;
	struct proto_iter it;
	struct proto_relay r;
	struct proto_pong pong;

	keep_alive();
	MPI_Iprobe(peer, MPI_ANY_TAG, ic, &flag, &st);
	if (!flag)
		return 0;
	MPI_Recv(rbuf, FT_MSG_MAX, MPI_BYTE, peer, MPI_ANY_TAG, ic, &st);
	MPI_Get_count(&st, MPI_BYTE, &count);
	switch (st.MPI_TAG) {
	case FT_MSG_RELAY:
		if (proto_iter_init(&it, rbuf, (size_t)count) == -1)
			fatal("malformed relay");
		while (proto_next_relay(&it, &r) == 1)
			add_ent(&r);
		break;
	case FT_MSG_PONG:
		if (proto_get_pong(rbuf, (size_t)count, &pong) == -1)
			fatal("malformed pong");
		agent_pong = 1;
		pong_queued = pong.queued;
		break;
	case FT_MSG_BYE:
		agent_bye = 1;
		break;
	case FT_MSG_HELLO:
		break;
	default:
		fatal("unexpected message from the agent");
	}
	return 1;
}

/* How many entries of SLOT (any slot: -1), GEN (any: 0) and TAG. */
static size_t
count_ents(int slot, uint32_t gen, uint32_t tag)
{
	size_t i, k = 0;

	for (i = 0; i < nents; i++)
		if ((slot < 0 || ents[i].slot == (uint32_t)slot) &&
		    (gen == 0 || ents[i].gen == gen) && ents[i].tag == tag)
			k++;
	return k;
}

/* Pump until COUNT entries like that are in, or WAIT seconds. */
static int
wait_ents(int slot, uint32_t gen, uint32_t tag, size_t count)
{
	double until = ft_now() + WAIT;

	while (count_ents(slot, gen, tag) < count && ft_now() < until)
		if (!pump())
			ft_sleep(0.0002);
	return count_ents(slot, gen, tag) >= count;
}

static void
send_msg(int tag, struct ft_buf *b)
{
	MPI_Send(b->data, (int)b->len, MPI_BYTE, peer, tag, ic);
	ft_buf_free(b);
}

/* A RELAY being built. */
struct relay {
	struct ft_buf b;
	uint32_t n;
};

static void
relay_add(struct relay *r, uint32_t slot, uint32_t gen, uint32_t tag,
	  const struct ft_buf *p)
{
	struct proto_relay e = { slot, gen, tag, p ? p->data : "",
				 p ? p->len : 0 };

	if (r->n == 0)
		proto_begin_list(&r->b);
	proto_put_relay(&r->b, &e);
	r->n++;
}

static void
relay_send(struct relay *r)
{
	proto_set_count(&r->b, r->n);
	send_msg(FT_MSG_RELAY, &r->b);
	r->n = 0;
}

static void
welcome(struct ft_buf *b)
{
	struct proto_welcome w = {
		.output_cap = 65536, .master_timeout = 10, .idle_nap = 0.05,
		.node = "nodeA", .node_len = 5,
		.heartbeat = getenv("AGENT_MASTER_HB") ?
			     atof(getenv("AGENT_MASTER_HB")) : HB,
		.ping_timeout = PING_TIMEOUT,
	};

	proto_put_welcome(b, &w);
}

static void
spawn_agent(const char *bindir)
{
	char *exe = ft_asprintf("%s/ftfarm-worker", bindir);
	char *argv[] = { "--node-index", "0", "--node", "nodeA",
			 "--state-dir", "/tmp", NULL };
	struct ft_buf b = { 0 };
	MPI_Info info;
	int err;

	if (getenv("AGENT_MASTER_STATIC")) {
		ic = MPI_COMM_WORLD;	/* the agent is rank 1 of our world */
		peer = 1;
	} else {
		MPI_Info_create(&info);
		MPI_Info_set(info, "bind_to", "none");
		MPI_Comm_spawn(exe, argv, 1, info, 0, MPI_COMM_SELF, &ic,
			       &err);
		MPI_Info_free(&info);
	}
	free(exe);
	rbuf = ft_malloc(FT_MSG_MAX);
	{
		struct proto_hello h;
		MPI_Status st;
		int count;

		MPI_Recv(rbuf, FT_MSG_MAX, MPI_BYTE, peer, FT_MSG_HELLO, ic, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (proto_get_hello(rbuf, (size_t)count, &h) == -1 ||
		    h.version != FT_PROTO_VERSION || h.slot != 0)
			fatal("bad hello from the agent");
		agent_pid = (pid_t)h.pid;
	}
	welcome(&b);
	send_msg(FT_MSG_WELCOME, &b);
}

/* Spawn slots FIRST..LAST-1 as GEN and welcome each once it said hello.
 * Fills PIDS[slot].  Returns the seconds to the last hello. */
static double
start_slots(uint32_t first, uint32_t last, uint32_t gen, pid_t *pids)
{
	struct relay r = { 0 };
	struct ft_buf w = { 0 };
	double t0 = ft_now(), t;
	uint32_t s;
	size_t i;

	for (s = first; s < last; s++)
		relay_add(&r, s, gen, FT_MSG_SPAWN, NULL);
	relay_send(&r);
	for (s = first; s < last; s++)
		if (!wait_ents((int)s, gen, FT_MSG_HELLO, 1))
			fatal("a slot said no hello");
	t = ft_now() - t0;
	welcome(&w);
	for (i = 0; i < nents; i++) {
		struct proto_hello h;

		if (ents[i].tag != FT_MSG_HELLO || ents[i].gen != gen ||
		    ents[i].slot < first || ents[i].slot >= last)
			continue;
		if (proto_get_hello(ents[i].p, ents[i].n, &h) == -1)
			fatal("malformed slot hello");
		CHECK(h.slot == ents[i].slot, "hello of slot %u says %u",
		      ents[i].slot, h.slot);
		pids[h.slot] = (pid_t)h.pid;
		relay_add(&r, h.slot, gen, FT_MSG_WELCOME, &w);
	}
	relay_send(&r);
	ft_buf_free(&w);
	return t;
}

/* Assign SLOT (GEN) the tasks FIRST..FIRST+N-1: SPECS[i % NSPEC]. */
static void
assign(uint32_t slot, uint32_t gen, uint64_t first, int n, const char **specs,
       int nspec)
{
	struct relay r = { 0 };
	struct ft_buf b = { 0 };
	int i;

	proto_begin_list(&b);
	for (i = 0; i < n; i++) {
		const char *s = specs[i % nspec];
		struct proto_task t = {
			.tid = first + (uint64_t)i, .attempt = 1, .spec = s,
			.spec_len = strlen(s), .cpus = 1, .gpus = "",
			.cpuset = "",
		};

		proto_put_task(&b, &t);
	}
	proto_set_count(&b, (uint32_t)n);
	relay_add(&r, slot, gen, FT_MSG_ASSIGN, &b);
	relay_send(&r);
	ft_buf_free(&b);
}

/* Results per task id in [0, N): counts in SEEN, the slot in BY; checks
 * each is ok. */
static size_t
tally(uint64_t n, int *seen, int *by)
{
	size_t i, total = 0;

	memset(seen, 0, n * sizeof(*seen));
	for (i = 0; i < nents; i++) {
		struct proto_iter it;
		struct proto_result res;

		if (ents[i].tag != FT_MSG_RESULT)
			continue;
		if (proto_iter_init(&it, ents[i].p, ents[i].n) == -1)
			fatal("malformed results");
		while (proto_next_result(&it, &res) == 1) {
			if (res.tid >= n)
				continue;
			seen[res.tid]++;
			by[res.tid] = (int)ents[i].slot;
			total++;
			CHECK(res.ok || res.tid >= n - 1, "task %llu failed: %.*s",
			      (unsigned long long)res.tid, (int)res.reason_len,
			      res.reason);
		}
	}
	return total;
}

/* Pump until the results of tasks [0, N) number WANT, or WAIT seconds.
 * Returns the tally (tally's SEEN and BY filled). */
static size_t
wait_tally(uint64_t n, size_t want, int *seen, int *by)
{
	double until = ft_now() + WAIT;
	size_t got;

	while ((got = tally(n, seen, by)) < want && ft_now() < until)
		if (!pump())
			ft_sleep(0.0002);
	return got;
}

/* The EXITED entry of SLOT, GEN (index into ents), or -1. */
static long
exited_at(uint32_t slot, uint32_t gen, struct proto_exited *e)
{
	size_t i;

	for (i = 0; i < nents; i++)
		if (ents[i].tag == FT_MSG_EXITED && ents[i].slot == slot &&
		    ents[i].gen == gen) {
			if (proto_get_exited(ents[i].p, ents[i].n, e) == -1)
				fatal("malformed exited");
			return (long)i;
		}
	return -1;
}

static void
stop_agent(void)
{
	struct ft_buf b = { 0 };
	double until = ft_now() + WAIT;

	proto_put_stop(&b, 0);
	send_msg(FT_MSG_STOP, &b);
	while (!agent_bye && ft_now() < until)
		if (!pump())
			ft_sleep(0.001);
	CHECK(agent_bye, "no bye from the agent");
}

static long
pss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* The slot's tasks, its death at a task's hand after their results. */
static void
check_tasks_and_kill(pid_t *pids)
{
	const char *mix[] = { "{\"type\":\"sleep\",\"seconds\":0}",
			      "{\"type\":\"exec\",\"argv\":[\"true\"]}" };
	const char *die[] = { "{\"type\":\"exec\",\"argv\":[\"sh\",\"-c\","
			      "\"kill -9 $FTFARM_WORKER_PID\"]}" };
	int seen[ALL + 1], by[ALL + 1], s, dup = 0, wrong = 0;
	struct proto_exited e;
	long at;
	size_t i;

	for (s = 0; s < 4; s++)
		assign((uint32_t)s, 1, (uint64_t)s * PER_SLOT, PER_SLOT, mix, 2);
	/* Slot 0's last task kills it: its results come first. */
	assign(0, 1, ALL, 1, die, 1);
	wait_ents(0, 1, FT_MSG_EXITED, 1);
	wait_tally(ALL + 1, ALL, seen, by);
	for (i = 0; i < ALL; i++) {
		if (seen[i] != 1)
			fprintf(stderr, "task %zu: %d results\n", i, seen[i]);
		dup += seen[i] != 1;
		wrong += seen[i] == 1 && by[i] != (int)(i / PER_SLOT);
	}
	CHECK(dup == 0, "%d tasks not seen exactly once", dup);
	CHECK(wrong == 0, "%d results from the wrong slot", wrong);
	CHECK(seen[ALL] == 0, "the killing task has a result");
	at = exited_at(0, 1, &e);
	CHECK(at >= 0 && strstr(e.reason, "signal 9") && !e.hung,
	      "slot 0's end: %.*s", at >= 0 ? (int)e.reason_len : 4,
	      at >= 0 ? e.reason : "none");
	for (i = 0; at >= 0 && i < nents; i++)
		CHECK(!(ents[i].slot == 0 && ents[i].tag == FT_MSG_RESULT &&
			(long)i > at), "a result of slot 0 after its EXITED");
	printf("tasks: %d results exactly once, slot 0 (pid %d) ended: %.*s\n",
	       ALL, (int)pids[0], (int)e.reason_len, e.reason);
}

static void
check_stopped(pid_t *pids)
{
	struct proto_exited e;
	double t0, dt;
	long at;

	t0 = ft_now();
	kill(pids[1], SIGSTOP);
	wait_ents(1, 1, FT_MSG_EXITED, 1);
	dt = ft_now() - t0;
	at = exited_at(1, 1, &e);
	CHECK(at >= 0 && e.hung && dt <= HB + PING_TIMEOUT + 0.3,
	      "stopped slot: %s after %.2f s", at >= 0 ? "hung" : "none", dt);
	printf("SIGSTOP: slot 1 reported hung after %.3f s: %.*s\n", dt,
	       at >= 0 ? (int)e.reason_len : 0, at >= 0 ? e.reason : "");
	t0 = ft_now();
	kill(pids[3], SIGKILL);
	wait_ents(3, 1, FT_MSG_EXITED, 1);
	dt = ft_now() - t0;
	CHECK(exited_at(3, 1, &e) >= 0 && dt < 0.5, "SIGKILL seen in %.3f s",
	      dt);
	printf("SIGKILL: slot 3 reported after %.3f s\n", dt);
}

static void
check_kill_respawn(pid_t *pids)
{
	const char *one[] = { "{\"type\":\"sleep\",\"seconds\":0}" };
	struct relay r = { 0 };
	struct proto_exited e;
	int seen[3000], by[3000];

	relay_add(&r, 2, 1, FT_MSG_KILL, NULL);
	relay_send(&r);
	wait_ents(2, 1, FT_MSG_EXITED, 1);
	CHECK(exited_at(2, 1, &e) >= 0 && strstr(e.reason, "signal 9"),
	      "KILL of slot 2 not reported");
	start_slots(0, 1, 2, pids);
	assign(0, 2, 2000, 5, one, 1);
	wait_ents(0, 2, FT_MSG_RESULT, 1);
	wait_tally(3000, ALL + 5, seen, by);
	CHECK(seen[2000] == 1 && seen[2004] == 1 && by[2004] == 0,
	      "the respawned slot ran no task");
	printf("KILL, respawn: slot 0 generation 2 (pid %d) runs tasks\n",
	       (int)pids[0]);
}

static void
check_ping_and_stop(pid_t *pids)
{
	struct ft_buf b = { 0 };
	double until = ft_now() + WAIT;

	agent_pong = 0;
	proto_put_ping(&b, 7);
	send_msg(FT_MSG_PING, &b);
	while (!agent_pong && ft_now() < until)
		if (!pump())
			ft_sleep(0.001);
	CHECK(agent_pong && pong_queued == 1, "pong: %d live %u", agent_pong,
	      pong_queued);
	stop_agent();
	CHECK(count_ents(0, 2, FT_MSG_BYE) == 1, "no bye from slot 0");
	CHECK(count_ents(0, 2, FT_MSG_EXITED) == 1, "no end of slot 0");
	ft_sleep(0.2);
	for (int s = 0; s < 4; s++)
		CHECK(kill(pids[s], 0) == -1, "slot %d (pid %d) is left", s,
		      (int)pids[s]);
}

static void
run_check(void)
{
	pid_t pids[4] = { 0 };

	start_slots(0, 4, 1, pids);
	check_tasks_and_kill(pids);
	check_stopped(pids);
	check_kill_respawn(pids);
	check_ping_and_stop(pids);
}

/* CPU seconds PID has used. */
static double
cpu_of(pid_t pid)
{
	char path[64];
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (f == NULL)
		return 0;
	if (fscanf(f, "%*d (%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
		   "%*u %lu %lu", &ut, &st) != 2)
		ut = st = 0;
	fclose(f);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU of the agent and of its N slots over IDLE seconds of quiet. */
static void
measure_idle(const pid_t *pids, uint32_t n, double idle)
{
	double a0 = cpu_of(agent_pid), s0 = 0, a1, s1 = 0, until;
	uint32_t i;

	for (i = 0; i < n; i++)
		s0 += cpu_of(pids[i]);
	until = ft_now() + idle;
	while (ft_now() < until)
		if (!pump())
			ft_sleep(0.05);
	a1 = cpu_of(agent_pid);
	for (i = 0; i < n; i++)
		s1 += cpu_of(pids[i]);
	printf("idle: over %.0f s the agent used %.2f %% of a CPU, its %u "
	       "slots %.2f %%\n", idle, 100 * (a1 - a0) / idle, n,
	       100 * (s1 - s0) / idle);
}

static void
run_start(uint32_t n)
{
	pid_t *pids = ft_calloc(n, sizeof(*pids));
	double t = start_slots(0, n, 1, pids);
	long pss = pss_kib(pids[n - 1]);

	ft_sleep(1.0);
	printf("start: %u slots said hello %.3f s after SPAWN; PSS of one "
	       "slot %ld KiB (after 1 s: %ld KiB), of the agent %ld KiB\n", n,
	       t, pss, pss_kib(pids[n - 1]), pss_kib(agent_pid));
	if (getenv("AGENT_MASTER_IDLE"))
		measure_idle(pids, n, atof(getenv("AGENT_MASTER_IDLE")));
	stop_agent();
	CHECK(count_ents(-1, 1, FT_MSG_BYE) == n, "%zu byes of %u",
	      count_ents(-1, 1, FT_MSG_BYE), n);
	free(pids);
}

/* Without ftfarm-slot beside the agent: the slot's end is reported. */
static void
run_noslot(void)
{
	struct relay r = { 0 };
	struct proto_exited e;

	relay_add(&r, 5, 3, FT_MSG_SPAWN, NULL);
	relay_send(&r);
	wait_ents(5, 3, FT_MSG_EXITED, 1);
	CHECK(exited_at(5, 3, &e) >= 0 &&
	      strstr(e.reason, "cannot start ftfarm-slot"), "no report");
	printf("no ftfarm-slot: %.*s\n", (int)e.reason_len, e.reason);
	stop_agent();
}

/* A slot that never says hello is killed and reported hung. */
static void
run_nohello(void)
{
	struct relay r = { 0 };
	struct proto_exited e;
	double t0 = ft_now();

	relay_add(&r, 2, 1, FT_MSG_SPAWN, NULL);
	relay_send(&r);
	wait_ents(2, 1, FT_MSG_EXITED, 1);
	CHECK(exited_at(2, 1, &e) >= 0 && e.hung &&
	      strstr(e.reason, "no hello"), "no report of a silent slot");
	printf("silent slot: reported after %.1f s: %.*s\n", ft_now() - t0,
	       (int)e.reason_len, e.reason);
	stop_agent();
}

int
main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3)
		fatal("usage: agent_master BINDIR check | start N");
	spawn_agent(argv[1]);
	if (strcmp(argv[2], "start") == 0 && argc > 3)
		run_start((uint32_t)atoi(argv[3]));
	else if (strcmp(argv[2], "noslot") == 0)
		run_noslot();
	else if (strcmp(argv[2], "nohello") == 0)
		run_nohello();
	else
		run_check();
	MPI_Finalize();
	printf("%s\n", failures ? "FAILED" : "OK");
	return failures ? 1 : 0;
}
