/* bmc: the nodes' BMCs, driven with ipmitool (see bmc.h). */
#include "bmc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "log.h"

#define ARGV_MAX 24

/* One BMC: its command waiting for the gap, or in flight. */
struct slot {
	struct master *m;
	int node;
	enum bmc_cmd cmd;		/* 0: none */
	bmc_done_fn done;
	struct child *child;		/* in flight */
	ev_timer gap;			/* waiting for the gap */
	double last_end;		/* when its last command ended (monotonic) */
};

static struct slot **slots;	/* apart: their timers stay put */
static int nslots;

static const char *const cmd_words[] = {
	[BMC_STATUS] = "status", [BMC_CYCLE] = "cycle", [BMC_ON] = "on",
};

const char *
bmc_cmd_name(enum bmc_cmd cmd)
{
	static const char *const names[] = {
		[BMC_STATUS] = "chassis power status",
		[BMC_CYCLE] = "chassis power cycle",
		[BMC_ON] = "chassis power on",
	};

	return cmd >= BMC_STATUS && cmd <= BMC_ON ? names[cmd] : "?";
}

void
bmc_init(struct master *m)
{
	nslots = 0;
	slots = NULL;
	bmc_grow(m);
}

void
bmc_grow(struct master *m)
{
	int i, n = m->cfg.nnodes;

	if (n <= nslots)
		return;
	slots = ft_realloc(slots, (size_t)n * sizeof(*slots));
	for (i = nslots; i < n; i++) {
		slots[i] = ft_calloc(1, sizeof(*slots[i]));
		slots[i]->m = m;
		slots[i]->node = i;
		slots[i]->last_end = -1e9;
	}
	nslots = n;
}

void
bmc_free(struct master *m)
{
	int i;

	(void)m;
	for (i = 0; i < nslots; i++) {
		bmc_cancel(i);
		free(slots[i]);
	}
	free(slots);
	slots = NULL;
	nslots = 0;
}

int
bmc_busy(int node)
{
	return slots && node < nslots && slots[node]->cmd != 0;
}

void
bmc_cancel(int node)
{
	struct slot *s = slots[node];

	if (s->cmd == 0)
		return;
	ev_timer_stop(s->m->loop, &s->gap);
	child_abandon(s->child);
	s->child = NULL;
	s->cmd = 0;
	s->last_end = ft_now();
}

/* The numbers of an ipmitool command line, as text. */
struct nums {
	char port[12], timeout[12], retries[12], cipher[12];
};

/* The argv of S's command: pointers into the config and NUMS. */
static void
build_argv(const struct slot *s, char **argv, struct nums *nums)
{
	const struct ft_bmc *b = s->m->cfg.nodes[s->node].bmc;
	int k = 0;

	snprintf(nums->port, sizeof(nums->port), "%d", b->port);
	snprintf(nums->timeout, sizeof(nums->timeout), "%d", b->timeout);
	snprintf(nums->retries, sizeof(nums->retries), "%d", b->retries);
	snprintf(nums->cipher, sizeof(nums->cipher), "%d", b->cipher_suite);
	argv[k++] = b->ipmitool;
	argv[k++] = "-I";
	argv[k++] = b->interface;
	if (strcmp(b->interface, "lanplus") == 0) {
		argv[k++] = "-C";
		argv[k++] = nums->cipher;
	}
	argv[k++] = "-N";
	argv[k++] = nums->timeout;
	argv[k++] = "-R";
	argv[k++] = nums->retries;
	argv[k++] = "-H";
	argv[k++] = b->host;
	argv[k++] = "-p";
	argv[k++] = nums->port;
	argv[k++] = "-U";
	argv[k++] = b->user;
	argv[k++] = "-f";
	argv[k++] = b->password_file;
	argv[k++] = "chassis";
	argv[k++] = "power";
	argv[k++] = (char *)cmd_words[s->cmd];
	argv[k] = NULL;
}

/* "Chassis Power is on" -> 1, "... off" -> 0, else -1. */
static int
parse_power(const char *out)
{
	const char *p = strstr(out, "Chassis Power is ");

	if (p == NULL)
		return -1;
	p += strlen("Chassis Power is ");
	if (strncmp(p, "on", 2) == 0)
		return 1;
	return strncmp(p, "off", 3) == 0 ? 0 : -1;
}

/* Log R, the end of S's command, and write its event. */
static void
report(const struct slot *s, const struct child_result *r,
       const struct bmc_result *br)
{
	const char *name = s->m->cfg.nodes[s->node].name;
	char what[CHILD_OUT_MAX + 64];

	child_describe(r, what, sizeof(what));
	if (br->ok)
		log_info("node %s: ipmitool %s: %s (%.2f s)", name,
			 bmc_cmd_name(s->cmd), what, r->seconds);
	else
		log_warnx("node %s: ipmitool %s failed: %s (%.2f s); output: "
			  "%s", name, bmc_cmd_name(s->cmd), what, r->seconds,
			  r->out);
	ev_bmc_command(&s->m->events, name, bmc_cmd_name(s->cmd),
		       r->started && !r->timed_out && !r->signal ? r->exit : -1,
		       r->seconds, br->ok ? NULL : br->error);
}

static void
on_done(void *arg, const struct child_result *r)
{
	struct slot *s = arg;
	struct bmc_result br = { .ran = r->started, .power = -1,
				 .seconds = r->seconds };
	enum bmc_cmd cmd = s->cmd;
	bmc_done_fn done = s->done;

	br.ok = r->started && !r->timed_out && r->signal == 0 && r->exit == 0;
	if (br.ok && cmd == BMC_STATUS) {
		br.power = parse_power(r->out);
		if (br.power < 0) {
			br.ok = 0;
			snprintf(br.error, sizeof(br.error), "unexpected "
				 "answer: %.200s", r->out);
		}
	}
	if (!br.ok && br.error[0] == '\0') {
		child_describe(r, br.error, sizeof(br.error));
		if (!r->started)
			snprintf(br.error, sizeof(br.error), "ipmitool (%s) "
				 "cannot run: %s",
				 s->m->cfg.nodes[s->node].bmc->ipmitool,
				 strerror(r->err_no));
	}
	report(s, r, &br);
	s->child = NULL;
	s->cmd = 0;
	s->last_end = ft_now();
	done(s->m, s->node, cmd, &br);
}

/* Start S's command now. */
static void
run(struct slot *s)
{
	const struct ft_bmc *b = s->m->cfg.nodes[s->node].bmc;
	char *argv[ARGV_MAX];
	struct nums nums;

	build_argv(s, argv, &nums);
	log_debug("node %s: %s %s", s->m->cfg.nodes[s->node].name,
		  b->ipmitool, bmc_cmd_name(s->cmd));
	s->child = child_start(s->m->loop, argv, NULL, b->deadline, on_done,
			       s);
}

static void
on_gap(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)revents;
	run(w->data);
}

int
bmc_send(struct master *m, int node, enum bmc_cmd cmd, bmc_done_fn done)
{
	struct slot *s = slots[node];
	double wait;

	if (s->cmd != 0)
		return -1;
	s->cmd = cmd;
	s->done = done;
	wait = s->last_end + m->cfg.nodes[node].bmc->min_gap - ft_now();
	if (wait <= 0) {
		run(s);
		return 0;
	}
	ev_now_update(m->loop);		/* the gap counts from now */
	ev_timer_init(&s->gap, on_gap, wait, 0);
	s->gap.data = s;
	ev_timer_start(m->loop, &s->gap);
	return 0;
}
