/* hosts: hostfile, host probes and the hosts left out (see hosts.h). */
#include "hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "util.h"

#define WHYLEN 160

/* srun ... -w HOST sh -c CMD into V (room for 10). */
static char **
slurm_argv(char **v, const char *host, const char *cmd)
{
	const char *job = getenv("SLURM_JOB_ID");
	int n = 0;

	v[n++] = ft_strdup("srun");
	v[n++] = ft_strdup("--overlap");
	v[n++] = ft_asprintf("--jobid=%s", job ? job : "");
	v[n++] = ft_strdup("-N1");
	v[n++] = ft_strdup("-n1");
	v[n++] = ft_strdup("-w");
	v[n++] = ft_strdup(host);
	v[n++] = ft_strdup("sh");
	v[n++] = ft_strdup("-c");
	v[n++] = ft_strdup(cmd);
	return v;
}

char **
hosts_remote_argv(const struct ft_config *cfg, const char *host,
		  const char *cmd)
{
	char *copy = ft_strdup(cfg->ssh), *tok, *save = NULL;
	char **v = ft_calloc(strlen(cfg->ssh) / 2 + 12, sizeof(char *));
	char opt[64];
	int n = 0;

	if (cfg->slurm) {
		free(copy);
		return slurm_argv(v, host, cmd);
	}
	/* "ssh" is a command line such as "ssh -F /path/ssh_config", split
	 * at blanks the way Open MPI splits plm_rsh_agent. */
	for (tok = strtok_r(copy, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save))
		v[n++] = ft_strdup(tok);
	snprintf(opt, sizeof(opt), "ConnectTimeout=%d", HOSTS_CONNECT_TIMEOUT);
	v[n++] = ft_strdup("-o");
	v[n++] = ft_strdup(opt);
	v[n++] = ft_strdup("-o");
	v[n++] = ft_strdup("BatchMode=yes");
	v[n++] = ft_strdup(host);
	v[n++] = ft_strdup(cmd);
	free(copy);
	return v;
}

void
hosts_argv_free(char **v)
{
	int i;

	for (i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* ---- probes ---- */

/* One probe under way. */
struct probe {
	const char *host;
	const char *cmd;		/* the shell command run there */
	pid_t pid;
	int fd;				/* its stderr, -1 once closed */
	char err[WHYLEN];		/* the last line it wrote there */
	size_t len;
	int status;			/* wait status, -1 while it runs */
};

/* Start ssh HOST true with its stderr into a pipe.  0 or -1. */
static int
probe_start(const struct ft_config *cfg, struct probe *p)
{
	char **argv = hosts_remote_argv(cfg, p->host, p->cmd ? p->cmd : "true");
	int fds[2];

	p->status = -1;
	p->fd = -1;
	p->len = 0;
	p->err[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) == -1)
		goto fail;
	p->pid = fork();
	if (p->pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(fds[1], 2);
		execvp(argv[0], argv);
		dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(255);
	}
	close(fds[1]);
	if (p->pid < 0) {
		close(fds[0]);
		goto fail;
	}
	p->fd = fds[0];
	hosts_argv_free(argv);
	return 0;
fail:
	snprintf(p->err, sizeof(p->err), "cannot run %s: %s", argv[0],
		 strerror(errno));
	hosts_argv_free(argv);
	return -1;
}

/* Read what P wrote; keep its last non-empty line. */
static void
probe_read(struct probe *p)
{
	char buf[512], *line, *nl;
	ssize_t n = read(p->fd, buf, sizeof(buf) - 1);

	if (n <= 0) {
		if (n == 0 || errno != EINTR) {
			close(p->fd);
			p->fd = -1;
		}
		return;
	}
	buf[n] = '\0';
	for (line = buf; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		line[strcspn(line, "\r")] = '\0';	/* ssh ends lines with \r\n */
		if (*line && strncmp(line, "Warning: Permanently", 20) != 0)
			snprintf(p->err, sizeof(p->err), "%.*s",
				 (int)sizeof(p->err) - 1, line);
		if (!nl)
			break;
	}
}

/* Wait for the probes of P (N of them) until UNTIL (monotonic); kill
 * those still running then. */
static void
probe_wait(struct probe *p, int n, double until, void (*tick)(void *),
	   void *arg)
{
	struct pollfd pfd[n];
	int i, k, open;

	for (;;) {
		for (i = k = 0; i < n; i++)
			if (p[i].fd >= 0)
				pfd[k++] = (struct pollfd){ p[i].fd, POLLIN, 0 };
		open = k;
		if (open == 0 || ft_now() >= until)
			break;
		poll(pfd, (nfds_t)open,
		     (int)(fmin(until - ft_now(), 0.25) * 1000) + 1);
		if (tick)
			tick(arg);
		for (i = 0; i < n; i++)
			if (p[i].fd >= 0)
				probe_read(&p[i]);
	}
	for (i = 0; i < n; i++) {
		if (p[i].pid <= 0)
			continue;
		if (p[i].fd >= 0) {
			kill(p[i].pid, SIGKILL);
			close(p[i].fd);
			p[i].fd = -1;
			snprintf(p[i].err, sizeof(p[i].err), "no answer to ssh "
				 "in %.0f s", HOSTS_PROBE_BOUND);
		}
		waitpid(p[i].pid, &p[i].status, 0);
		p[i].pid = 0;
	}
}

/* Did P's host answer? */
static int
probe_ok(const struct probe *p)
{
	return p->status != -1 && WIFEXITED(p->status) &&
	       WEXITSTATUS(p->status) == 0;
}

/* Probe those of P (N) not yet answered, in parallel. */
static void
probe_round(const struct ft_config *cfg, struct probe *p, int n,
	    void (*tick)(void *), void *arg)
{
	int i;

	for (i = 0; i < n; i++)
		if (!probe_ok(&p[i]))
			probe_start(cfg, &p[i]);
	probe_wait(p, n, ft_now() + HOSTS_PROBE_BOUND, tick, arg);
}

/* The distinct remote hosts of CFG into P; their count. */
static int
remote_hosts(const struct ft_config *cfg, struct probe *p)
{
	int i, k, n = 0;

	for (i = 0; i < cfg->nnodes; i++) {
		const char *h = cfg->nodes[i].host;

		if (ft_host_is_local(h))
			continue;
		for (k = 0; k < n && strcmp(p[k].host, h) != 0; k++)
			;
		if (k == n)
			p[n++] = (struct probe){ .host = h, .fd = -1,
						 .status = -1 };
	}
	return n;
}

char *
hosts_probe_cmd(const char *worker)
{
	char want[64];

	snprintf(want, sizeof(want), FT_WORKER_VERSION_FMT, FT_PROTO_VERSION);
	return ft_asprintf("v=$('%s' --version 2>/dev/null); [ \"$v\" = '%s' ]"
			   " || { echo \"%s: missing or not '%s' (${v:-no "
			   "answer})\" >&2; exit 3; }", worker, want, worker,
			   want);
}

int
hosts_probe(const struct ft_config *cfg, const char *worker,
	    char (*why)[WHYLEN], void (*tick)(void *), void *arg)
{
	struct probe *p = ft_calloc((size_t)cfg->nnodes + 1, sizeof(*p));
	int n = remote_hosts(cfg, p), i, k, down = 0;
	char *cmd = hosts_probe_cmd(worker);

	for (k = 0; k < n; k++)
		p[k].cmd = cmd;

	/* A healthy probe took up to 1.2 s on a loaded machine: a second
	 * try keeps a slow answer from leaving a host out. */
	if (n > 0)
		probe_round(cfg, p, n, tick, arg);
	for (k = 0; k < n && probe_ok(&p[k]); k++)
		;
	if (k < n)
		probe_round(cfg, p, n, tick, arg);
	for (i = 0; i < cfg->nnodes; i++) {
		why[i][0] = '\0';
		for (k = 0; k < n; k++)
			if (strcmp(p[k].host, cfg->nodes[i].host) == 0 &&
			    !probe_ok(&p[k])) {
				snprintf(why[i], WHYLEN, "%s", p[k].err[0] ?
					 p[k].err : "ssh failed");
				down++;
			}
	}
	free(cmd);
	free(p);
	return down;
}

int
hosts_run(const struct ft_config *cfg, int n, const char *const *host,
	  const char *const *cmd, char (*why)[WHYLEN])
{
	struct probe *p = ft_calloc((size_t)n + 1, sizeof(*p));
	int i, failed = 0;

	for (i = 0; i < n; i++)
		p[i] = (struct probe){ .host = host[i], .cmd = cmd[i],
				       .fd = -1, .status = -1 };
	probe_round(cfg, p, n, NULL, NULL);
	for (i = 0; i < n; i++) {
		why[i][0] = '\0';
		if (!probe_ok(&p[i])) {
			snprintf(why[i], WHYLEN, "%s", p[i].err[0] ? p[i].err :
				 "ssh failed");
			failed++;
		}
	}
	free(p);
	return failed;
}

/* ---- the files ---- */

int
hosts_write_hostfile(const struct ft_config *cfg, char (*why)[WHYLEN],
		     const char *path, char *err, size_t n)
{
	int *slots = ft_calloc((size_t)cfg->nnodes + 1, sizeof(int));
	struct ft_buf b = { 0 };
	int i, k, local = 1, rc;

	/* The master (mpirun's rank 0) runs on the first host: here.  Each
	 * node is one MPI process, its agent (which starts the node's
	 * worker slots itself). */
	for (i = 0; i < cfg->nnodes; i++) {
		const char *h = cfg->nodes[i].host;

		if (ft_host_is_local(h)) {
			local++;
			continue;
		}
		if (why && why[i][0])
			continue;
		for (k = 0; strcmp(cfg->nodes[k].host, h) != 0; k++)
			;
		slots[k]++;
	}
	ft_buf_printf(&b, "localhost slots=%d\n", local);
	for (i = 0; i < cfg->nnodes; i++)
		if (slots[i])
			ft_buf_printf(&b, "%s slots=%d\n", cfg->nodes[i].host,
				      slots[i]);
	rc = ft_write_file_atomic(path, b.data, b.len);
	if (rc == -1)
		snprintf(err, n, "%s: %s", path, strerror(errno));
	ft_buf_free(&b);
	free(slots);
	return rc;
}

int
hosts_write_down(const struct ft_config *cfg, char (*why)[WHYLEN], char *err,
		 size_t n)
{
	char *path = ft_asprintf("%s/%s", cfg->state_dir, HOSTS_DOWN_FILE);
	struct ft_buf b = { 0 };
	int i, rc = 0;

	for (i = 0; i < cfg->nnodes; i++)
		if (why[i][0])
			ft_buf_printf(&b, "%s %s %s\n", cfg->nodes[i].name,
				      cfg->nodes[i].host, why[i]);
	if (b.len == 0) {
		if (unlink(path) == -1 && errno != ENOENT)
			rc = -1;
	} else {
		rc = ft_write_file_atomic(path, b.data, b.len);
	}
	if (rc == -1)
		snprintf(err, n, "%s: %s", path, strerror(errno));
	ft_buf_free(&b);
	free(path);
	return rc;
}

int
hosts_read_down(const struct ft_config *cfg, char (*why)[WHYLEN])
{
	char *path = ft_asprintf("%s/%s", cfg->state_dir, HOSTS_DOWN_FILE);
	size_t len = 0;
	char *text = ft_read_file(path, &len), *line, *save = NULL;
	int i, down = 0;

	for (i = 0; i < cfg->nnodes; i++)
		why[i][0] = '\0';
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' '), *sp2 = sp ? strchr(sp + 1, ' ')
							: NULL;

		if (sp2 == NULL)
			continue;
		*sp = '\0';
		for (i = 0; i < cfg->nnodes; i++)
			if (strcmp(cfg->nodes[i].name, line) == 0 &&
			    !why[i][0]) {
				snprintf(why[i], WHYLEN, "%s", sp2 + 1);
				down++;
			}
	}
	free(text);
	free(path);
	return down;
}
