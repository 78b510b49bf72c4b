/* memcg: memory cgroups for a node's tasks (memcg.h). */
#include "memcg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "util.h"

#define NODE_PREFIX "ftfarm-"

struct memcg {
	enum cg_version v;
	char dir[PATH_MAX];
	int procs;			/* its cgroup.procs, for writing */
	uint64_t limit;			/* the limit set, 0: none yet */
	uint64_t ooms;			/* OOM kills counted so far */
};

static char node_dir[PATH_MAX];		/* the agent's, "" when none */
static char v2_parent[PATH_MAX];	/* v2: the cgroup the agent left, and */
static int v2_turned_on;		/* whether it turned memory on there */

/* DIR/NAME into OUT (PATH_MAX bytes).  0, or -1 when too long. */
static int
path_of(char *out, const char *dir, const char *name)
{
	return ft_snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

/* Write TEXT to DIR's cgroup file NAME.  0, or -1 with errno. */
static int
put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];

	if (path_of(path, dir, name) == -1) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return cg_write(path, text);
}

/* Remove cgroup DIR and the cgroups right inside it (what the agent and
 * its slots make is no deeper).  Those that still hold a process stay. */
static void
remove_tree(const char *dir)
{
	char sub[PATH_MAX];
	struct dirent *e;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)) != NULL)
		if (e->d_type == DT_DIR && e->d_name[0] != '.' &&
		    path_of(sub, dir, e->d_name) == 0)
			rmdir(sub);
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Remove the node directories beside ours in PARENT of agents that are
 * gone (killed before they could remove their own). */
static void
sweep(const char *parent)
{
	size_t k = strlen(NODE_PREFIX);
	char sub[PATH_MAX], *end;
	struct dirent *e;
	DIR *d = opendir(parent);
	long pid;

	while (d && (e = readdir(d)) != NULL) {
		if (e->d_type != DT_DIR || strncmp(e->d_name, NODE_PREFIX, k))
			continue;
		pid = strtol(e->d_name + k, &end, 10);
		if (*end == '\0' && pid > 0 && pid != (long)getpid() &&
		    !ft_pid_alive((pid_t)pid) &&
		    path_of(sub, parent, e->d_name) == 0)
			remove_tree(sub);
	}
	if (d)
		closedir(d);
}

/* Does DIR's cgroup file NAME list WORD? */
static int
lists(const char *dir, const char *name, const char *word)
{
	char path[PATH_MAX], *text, *p;
	size_t len, k = strlen(word);
	int yes = 0;

	if (path_of(path, dir, name) == -1 ||
	    (text = ft_read_file(path, &len)) == NULL)
		return 0;
	for (p = strstr(text, word); p && !yes; p = strstr(p + 1, word))
		yes = (p == text || p[-1] == ' ') &&
		      (p[k] == ' ' || p[k] == '\n' || p[k] == '\0');
	free(text);
	return yes;
}

/* Version 2: move the agent into NODE/agent and turn the memory
 * controller on for the children of its cgroup PARENT and of NODE.  0, or
 * -1 with WHY, everything undone that can be. */
static int
v2_take(const char *parent, const char *node, char *why, size_t n)
{
	char leaf[PATH_MAX];

	if (!lists(parent, "cgroup.controllers", "memory"))
		return ft_snprintf(why, n, "the memory controller is not "
				   "delegated to %s", parent), -1;
	if (path_of(leaf, node, "agent") == -1 || mkdir(leaf, 0755) == -1 ||
	    put(leaf, "cgroup.procs", "0") == -1)
		goto undo;
	v2_turned_on = !lists(parent, "cgroup.subtree_control", "memory");
	if (v2_turned_on &&
	    put(parent, "cgroup.subtree_control", "+memory") == -1) {
		put(parent, "cgroup.procs", "0");
		goto undo;
	}
	snprintf(v2_parent, sizeof(v2_parent), "%s", parent);
	if (put(node, "cgroup.subtree_control", "+memory") == -1) {
		ft_snprintf(why, n, "%s: cannot turn the memory controller on "
			    "for its children: %s", node, strerror(errno));
		return -1;
	}
	return 0;
undo:
	ft_snprintf(why, n, "%s holds other processes (version 2 turns the "
		    "memory controller on only for a cgroup without any): %s",
		    parent, strerror(errno));
	rmdir(leaf);
	rmdir(node);
	return -1;
}

int
memcg_node_open(char *why, size_t n)
{
	struct cg_where w;
	char dir[PATH_MAX];

	unsetenv(MEMCG_ENV);	/* an outer cluster's, when this one runs
				 * inside one of its tasks */
	if (cg_self(&w) == -1)
		return ft_snprintf(why, n, "no memory cgroup controller is "
				   "mounted"), -1;
	sweep(w.dir);
	if (ft_snprintf(dir, sizeof(dir), "%s/" NODE_PREFIX "%d", w.dir,
			(int)getpid()) == -1 ||
	    (mkdir(dir, 0755) == -1 && errno != EEXIST))
		return ft_snprintf(why, n, "cannot make %s: %s", dir,
				   strerror(errno)), -1;
	if (w.v == CG_V2 && v2_take(w.dir, dir, why, n) == -1)
		return -1;
	snprintf(node_dir, sizeof(node_dir), "%s", dir);
	setenv(MEMCG_ENV, dir, 1);
	return 0;
}

/* Version 2: give back what v2_take took, the slots' cgroups removed:
 * the memory controller off below the node's directory and, if the
 * agent turned it on there, in its old cgroup, and the agent back in
 * it (a cgroup with the controller on for its children may hold no
 * process).  Best effort: what stays is swept by the next agent. */
static void
v2_give_back(void)
{
	put(node_dir, "cgroup.subtree_control", "-memory");
	if (v2_turned_on)
		put(v2_parent, "cgroup.subtree_control", "-memory");
	put(v2_parent, "cgroup.procs", "0");
	v2_parent[0] = '\0';
}

void
memcg_node_close(void)
{
	if (node_dir[0]) {
		remove_tree(node_dir);		/* the slots' */
		if (v2_parent[0])
			v2_give_back();
		remove_tree(node_dir);		/* the agent's leaf, itself */
	}
	node_dir[0] = '\0';
}

/* ---- a slot's cgroup ---- */

/* The file of C's OOM kill count. */
static const char *
oom_file(const struct memcg *c)
{
	return c->v == CG_V1 ? "memory.oom_control" : "memory.events";
}

/* C's OOM kills so far (0 when unknown). */
static uint64_t
oom_count(const struct memcg *c)
{
	char path[PATH_MAX];
	uint64_t v = 0;

	if (path_of(path, c->dir, oom_file(c)) == 0)
		cg_read_key(path, "oom_kill", &v);
	return v;
}

struct memcg *
memcg_slot_open(int slot, char *why, size_t n)
{
	const char *node = getenv(MEMCG_ENV);
	struct memcg *c;
	char path[PATH_MAX];

	if (node == NULL || *node == '\0')
		return ft_snprintf(why, n, "the node has no memory cgroup"),
		       NULL;
	c = ft_calloc(1, sizeof(*c));
	c->procs = -1;
	c->v = path_of(path, node, "memory.limit_in_bytes") == 0 &&
	       access(path, F_OK) == 0 ? CG_V1 : CG_V2;
	if (ft_snprintf(c->dir, sizeof(c->dir), "%s/s%d-%d", node, slot,
			(int)getpid()) == -1 ||
	    (mkdir(c->dir, 0755) == -1 && errno != EEXIST) ||
	    path_of(path, c->dir, "cgroup.procs") == -1 ||
	    (c->procs = open(path, O_WRONLY | O_CLOEXEC)) == -1) {
		ft_snprintf(why, n, "cannot make %s: %s", c->dir,
			    strerror(errno));
		rmdir(c->dir);
		free(c);
		return NULL;
	}
	if (c->v == CG_V2) {
		/* The whole task goes when one of its processes must, and
		 * its limit is memory, not memory and swap. */
		put(c->dir, "memory.oom.group", "1");
		put(c->dir, "memory.swap.max", "0");
	}
	c->ooms = oom_count(c);
	return c;
}

int
memcg_limit(struct memcg *c, uint64_t bytes)
{
	char v[32];
	int rc;

	if (bytes == c->limit)
		return 0;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)bytes);
	if (c->v == CG_V2) {
		rc = put(c->dir, "memory.max", v);
	} else if (bytes > c->limit) {
		/* Memory and swap first: it may not be below memory's. */
		put(c->dir, "memory.memsw.limit_in_bytes", v);
		rc = put(c->dir, "memory.limit_in_bytes", v);
	} else {
		rc = put(c->dir, "memory.limit_in_bytes", v);
		put(c->dir, "memory.memsw.limit_in_bytes", v);
	}
	if (rc == 0)
		c->limit = bytes;
	return rc;
}

int
memcg_procs_fd(const struct memcg *c)
{
	return c->procs;
}

int
memcg_oom_killed(struct memcg *c)
{
	uint64_t now = oom_count(c);

	if (now <= c->ooms)
		return 0;
	c->ooms = now;
	return 1;
}

void
memcg_kill_all(struct memcg *c)
{
	char path[PATH_MAX], *text, *p, *end;
	size_t len;
	long pid;

	if (c->v == CG_V2 && put(c->dir, "cgroup.kill", "1") == 0)
		return;
	if (path_of(path, c->dir, "cgroup.procs") == -1 ||
	    (text = ft_read_file(path, &len)) == NULL)
		return;
	for (p = text; *p; p = end + (*end != '\0')) {
		pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0)
			kill((pid_t)pid, SIGKILL);
	}
	free(text);
}

void
memcg_slot_close(struct memcg *c)
{
	if (c == NULL)
		return;
	memcg_kill_all(c);
	if (c->procs >= 0)
		close(c->procs);
	rmdir(c->dir);
	free(c);
}
