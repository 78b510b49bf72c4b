/*
 * util: small helpers every program of ftfarm uses.
 */
#ifndef FT_UTIL_H
#define FT_UTIL_H

#include <stddef.h>
#include <sys/types.h>
#include <string.h>

#define FT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* Append VAL to the array ARR of N elements, room for CAP, grown as
 * needed (ft_realloc). */
#define FT_PUSH(arr, n, cap, val)					\
	do {								\
		if ((n) == (cap)) {					\
			(cap) = (cap) ? 2 * (cap) : 16;			\
			(arr) = ft_realloc((arr), (cap) * sizeof(*(arr))); \
		}							\
		(arr)[(n)++] = (val);					\
	} while (0)

/* Seconds on the monotonic clock. */
double ft_now(void);
/* Seconds since the epoch (wall clock), for logs. */
double ft_wall(void);
/* Sleep for S seconds (restarting on EINTR). */
void ft_sleep(double s);

/* malloc/calloc/realloc/strdup that abort with a message on exhaustion:
 * ftfarm treats running out of memory as fatal. */
void *ft_malloc(size_t n);
void *ft_calloc(size_t nmemb, size_t size);
void *ft_realloc(void *p, size_t n);
char *ft_strdup(const char *s);
/* printf into a new string (aborts on exhaustion). */
char *ft_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* snprintf that reports truncation: 0, or -1 when OUT was too small. */
int ft_snprintf(char *out, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Make DIR and its parents (mode 0755).  0 or -1 with errno. */
int ft_mkdirs(const char *dir);
/* Directory of PATH (a new string; "." for a bare name). */
char *ft_dirname(const char *path);
/* PATH made absolute against BASE when relative (a new string). */
char *ft_path_join(const char *base, const char *path);
/* Directory holding the running executable (a new string). */
char *ft_exe_dir(void);

/* Can files be made in DIR?  0, or -1 with WHY: it must exist, be a
 * directory and take a probe file (made and removed at once: access()
 * says yes to root on a read-only or root-squashed export). */
int ft_dir_writable(const char *dir, char *why, size_t n);

/* Remove PATH and, if it is a directory, everything in it (symbolic links
 * are removed, never followed).  0, or -1 with errno (what could be
 * removed is gone). */
int ft_rmtree(const char *path);

/* Rotate PATH: PATH.K-1 -> PATH.K down to PATH -> PATH.1, keeping KEEP
 * old files (PATH.KEEP is replaced; KEEP 0 removes PATH).  0, or -1 with
 * errno when a rename failed. */
int ft_rotate(const char *path, int keep);
/* The same for a log that other processes write with O_APPEND (they
 * cannot be told to open it again): its bytes are copied to PATH.1 and
 * PATH is cut to nothing, where those writers go on.  What they write
 * between the copy and the cut is lost.  0, or -1 with errno. */
int ft_rotate_shared(const char *path, int keep);

/* Write all N bytes of BUF to FD (restarting on EINTR).  0 or -1. */
int ft_write_all(int fd, const void *buf, size_t n);
/* The same on the socket FD, never raising SIGPIPE: a peer that closed
 * is -1 with EPIPE (or ECONNRESET), so the caller may still read what the
 * peer said before it closed. */
int ft_send_all(int fd, const void *buf, size_t n);
/* Read a whole file into a new NUL-terminated buffer.  NULL with errno. */
char *ft_read_file(const char *path, size_t *len);
/* Write DATA to PATH atomically (temp file + rename).  0 or -1 with errno. */
int ft_write_file_atomic(const char *path, const char *data, size_t len);
/* The same, the file synced before the rename and its directory after,
 * when SYNC: on disk once it returns 0. */
int ft_write_file_durable(const char *path, const char *data, size_t len,
			  int sync);
/* The decimal number at *P (before END), up to UINT32_MAX; *P moves past
 * its digits.  -1 when there are none or it is larger. */
long long ft_parse_u32(const char **p, const char *end);

/* fsync the directory DIR, or the one PATH is in.  0, or -1 with errno. */
int ft_fsync_dir(const char *dir);
int ft_fsync_parent(const char *path);

/* Is PID a live process (not a zombie)? */
int ft_pid_alive(pid_t pid);
/* Is PID live and not on its way out?  A killed process is exiting from
 * the moment it takes the signal, before its descriptors are closed: a
 * peer that sees its sockets close finds it exiting or gone, never
 * staying. */
int ft_pid_staying(pid_t pid);
/* Is PID busy: a thread of it runnable (state R: running, or waiting for
 * a CPU) or in the kernel (D: waiting for a page, a lock, a child's
 * exec)?  A process that has not answered for that is slow, not hung:
 * its main thread may sleep on a lock that a busy thread holds.  One
 * whose threads all sleep (S) or that is stopped (T) is not busy. */
int ft_pid_busy(pid_t pid);
/* PID's main thread's time on a CPU and waiting for one, in ns, into
 * *NS (/proc/PID/schedstat): -1 if there is no such process.  It grows
 * whenever the thread wakes up. */
int ft_pid_sched_ns(pid_t pid, unsigned long long *ns);
/* PID's state letter in /proc/PID/stat (R, S, D, T, Z, ...), 0 if none. */
char ft_pid_state(pid_t pid);

/* Keep freed memory for reuse rather than let glibc give it back on its
 * own: the caller trims (malloc_trim) once it has gone idle.  Blocks of up
 * to 64 MiB come from the heap; ONE_HEAP puts every thread on the main
 * heap, the only one whose top malloc_trim can shrink.  Call before any
 * thread starts. */
void ft_memory_keep(int one_heap);
/* The start time of PID (clock ticks since boot, /proc/PID/stat), or 0
 * when there is no such process.  A pid and its start time name one
 * process for good: pids are reused, the pair is not. */
unsigned long long ft_proc_start(pid_t pid);
/* Is PID the process started at START (and alive)? */
int ft_proc_is(pid_t pid, unsigned long long start);
/* A pidfd of PID (close-on-exec; readable once PID has exited), or -1
 * with errno (ESRCH: no such process; ENOSYS: no pidfds here). */
int ft_pidfd_open(pid_t pid);

/* Send the LEN bytes at BUF with descriptor FD (SCM_RIGHTS) as one
 * message on socket SOCK: 0, or -1 with errno. */
int ft_send_fd(int sock, const void *buf, size_t len, int fd);
/* Receive one message of at most LEN bytes into BUF and the descriptor
 * it carries (close-on-exec) into *FD, -1 if none: its length, 0 at end
 * of file, or -1 with errno. */
ssize_t ft_recv_fd(int sock, void *buf, size_t len, int *fd);
/* SIGKILL every process of this machine whose environment, as it was
 * started, holds ENTRY ("NAME=value") and, when not NULL, ENTRY2 too.
 * Returns how many were signalled. */
int ft_kill_by_env(const char *entry, const char *entry2);
/* The same with signal SIG. */
int ft_signal_by_env(const char *entry, const char *entry2, int sig);
/* Run ARGV (searched in PATH) with no input, its standard output into
 * OUT (N bytes at most, NUL-terminated), for TIMEOUT seconds at most
 * (then killed).  Its exit status, or -1 (could not run, killed). */
int ft_run_capture(char *const argv[], double timeout, char *out, size_t n);

/* SIGKILL every process of session SID (but this one).  Returns how many
 * were signalled. */
int ft_kill_session(pid_t sid);

/* Is HOST this machine ("localhost", "127.*", our host name)? */
int ft_host_is_local(const char *host);

/* A growing buffer, NUL-terminated after its LEN bytes once anything
 * was added.  The adds are inline: the master formats a results line out
 * of a dozen of them per task. */
struct ft_buf {
	char *data;
	size_t len;
	size_t cap;
};
/* Make room for MORE bytes and the NUL (out of line: the rare case). */
void ft_buf_grow(struct ft_buf *b, size_t more);

static inline void
ft_buf_reserve(struct ft_buf *b, size_t more)
{
	if (b->cap - b->len <= more)
		ft_buf_grow(b, more);
}

static inline void
ft_buf_add(struct ft_buf *b, const void *p, size_t n)
{
	ft_buf_reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static inline void
ft_buf_adds(struct ft_buf *b, const char *s)
{
	ft_buf_add(b, s, strlen(s));
}

void ft_buf_printf(struct ft_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Append S (LEN bytes) as the body of a JSON string (escaped, no
 * quotes). */
void ft_buf_json_str(struct ft_buf *b, const char *s, size_t len);
void ft_buf_free(struct ft_buf *b);

#endif
