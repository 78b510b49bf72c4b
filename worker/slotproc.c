/* slotproc: starting and ending one slot process (see slotproc.h). */
#include "slotproc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "util.h"
#include "zygote.h"

#define FIRST_FREE_FD 4

static struct rlimit fd_limit_was;	/* for the slots */
static int fd_limit_raised;

void
slotproc_more_fds(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur >= rl.rlim_max)
		return;
	fd_limit_was = rl;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		fd_limit_raised = 1;
}

/* In the child: close every descriptor from FIRST (most of ours are
 * close-on-exec already; the MPI library's may not be). */
static void
close_from(int first)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, first, ~0U, 0) == 0)
		return;
#endif
	for (int fd = first; fd < 65536; fd++)
		close(fd);
}

/* The child between vfork and exec: system calls only, nothing written
 * to memory it shares with the agent. */
static void
child(char *const argv[], int fd, pid_t parent)
{
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);		/* the agent is gone already */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (fd == 3)
		fcntl(fd, F_SETFD, 0);
	else if (dup2(fd, 3) != 3)
		_exit(127);
	close_from(FIRST_FREE_FD);
	if (fd_limit_raised)
		setrlimit(RLIMIT_NOFILE, &fd_limit_was);
	execv(argv[0], argv);
	_exit(127);
}

pid_t
slotproc_start(char *const argv[], int fd, int *pidfd, char *why, size_t n)
{
	pid_t parent = getpid(), pid;

	if (access(argv[0], X_OK) == -1) {
		snprintf(why, n, "%s: %s", argv[0], strerror(errno));
		return -1;
	}
	/* vfork: the agent is an MPI process of many mappings, and fork's
	 * copy of its page tables was most of a slot's start (costly under
	 * a hypervisor); the child only makes system calls until exec. */
	pid = vfork();
	if (pid == 0)
		child(argv, fd, parent);
	if (pid < 0) {
		snprintf(why, n, "vfork: %s", strerror(errno));
		return -1;
	}
	*pidfd = ft_pidfd_open(pid);
	if (*pidfd < 0) {
		snprintf(why, n, "pidfd_open: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

pid_t
slotproc_zygote(char *const argv[], int *ctl, char *why, size_t n)
{
	int sv[2], pidfd;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		snprintf(why, n, "socketpair: %s", strerror(errno));
		return -1;
	}
	pid = slotproc_start(argv, sv[1], &pidfd, why, n);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return -1;
	}
	close(pidfd);		/* its end shows on CTL, and in waitpid */
	if (fcntl(sv[0], F_SETFL, O_NONBLOCK) == -1) {
		snprintf(why, n, "fcntl: %s", strerror(errno));
		close(sv[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	*ctl = sv[0];
	return pid;
}

int
slotproc_zygote_ask(int ctl, uint32_t slot, int fd)
{
	struct zygote_ask ask = { .slot = slot };

	return ft_send_fd(ctl, &ask, sizeof(ask), fd);
}

int
slotproc_zygote_answer(int ctl, uint32_t *slot, int *pid)
{
	struct zygote_answer a;
	ssize_t got;

	do
		got = recv(ctl, &a, sizeof(a), MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (got != (ssize_t)sizeof(a))
		return -1;
	*slot = a.slot;
	*pid = a.pid;
	return 1;
}

void
slotproc_reason(int status, char *buf, size_t n)
{
	if (WIFSIGNALED(status))
		snprintf(buf, n, "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

void
slotproc_kill(pid_t pid, unsigned long long start)
{
	char entry[64], entry2[64];

	kill(pid, SIGKILL);
	snprintf(entry, sizeof(entry), "%s=%d", FT_WORKER_ENV, (int)pid);
	snprintf(entry2, sizeof(entry2), "%s=%llu", FT_WORKER_START_ENV, start);
	ft_kill_by_env(entry, entry2);
}
