/* log: the human-readable log of a program. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include <time.h>

static FILE *log_out;
static char *log_path;
static enum log_level log_level = LOG_INFO;
static const char *log_prog = "ftfarm";

/* Open PATH for appending, never through a symbolic link. */
static FILE *
open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW |
		      O_CLOEXEC, 0600);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "a");

	if (f == NULL && fd >= 0)
		close(fd);
	if (f)
		setvbuf(f, NULL, _IOLBF, 0);
	return f;
}

int
log_init(const char *path, const char *prog)
{
	if (prog)
		log_prog = prog;
	free(log_path);
	log_path = NULL;
	if (path == NULL) {
		log_out = stderr;
		return 0;
	}
	log_out = open_log(path);
	if (log_out == NULL) {
		log_out = stderr;
		return -1;
	}
	log_path = strdup(path);
	return 0;
}

long
log_size(void)
{
	return log_out && log_out != stderr ? ftell(log_out) : 0;
}

int
log_rotate(int keep)
{
	FILE *f;

	if (log_path == NULL)
		return 0;
	fflush(log_out);
	if (ft_rotate(log_path, keep) == -1)
		return -1;
	f = open_log(log_path);
	if (f == NULL)
		return -1;
	fclose(log_out);
	log_out = f;
	return 0;
}

void
log_set_level(enum log_level level)
{
	log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

int
log_level_parse(const char *name)
{
	if (strcmp(name, "debug") == 0)
		return LOG_DEBUG;
	if (strcmp(name, "info") == 0)
		return LOG_INFO;
	if (strcmp(name, "warn") == 0)
		return LOG_WARN;
	return -1;
}

static void
vlog(enum log_level level, const char *tag, int err, const char *fmt, va_list ap)
{
	static const char *names[] = { "debug", "info", "warn" };
	struct timespec ts;
	struct tm tm;
	char when[32];
	FILE *out = log_out ? log_out : stderr;

	if (level < log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(out, "%s.%03ldZ %s %s: ", when, ts.tv_nsec / 1000000,
		tag ? tag : names[level], log_prog);
	vfprintf(out, fmt, ap);
	if (err)
		fprintf(out, ": %s", strerror(err));
	fputc('\n', out);
}

#define LOG_BODY(level, tag, err) do {		\
	va_list ap;				\
	va_start(ap, fmt);			\
	vlog(level, tag, err, fmt, ap);		\
	va_end(ap);				\
} while (0)

void log_debug(const char *fmt, ...) { LOG_BODY(LOG_DEBUG, NULL, 0); }
void log_info(const char *fmt, ...) { LOG_BODY(LOG_INFO, NULL, 0); }
void log_warnx(const char *fmt, ...) { LOG_BODY(LOG_WARN, NULL, 0); }

void
log_warn(const char *fmt, ...)
{
	int e = errno;

	LOG_BODY(LOG_WARN, NULL, e);
}

void
fatal(const char *fmt, ...)
{
	int e = errno;

	LOG_BODY(LOG_WARN, "fatal", e);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	LOG_BODY(LOG_WARN, "fatal", 0);
	exit(1);
}

void
log_flush(void)
{
	fflush(log_out ? log_out : stderr);
}
