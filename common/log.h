/*
 * log: the human-readable log of a program.
 *
 * Lines go to one stream (stderr by default, or a file) as
 * "2026-11-22T10:00:00.123Z LEVEL message".  log_warn appends strerror(errno),
 * log_warnx does not.  The level can be changed at run time.
 */
#ifndef FT_LOG_H
#define FT_LOG_H

#include <stdio.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN };

/* Log to PATH (appending), or to stderr when PATH is NULL.  0 or -1. */
int log_init(const char *path, const char *prog);
void log_set_level(enum log_level level);
/* "debug" | "info" | "warn" -> level; -1 for anything else. */
int log_level_parse(const char *name);
enum log_level log_get_level(void);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void log_flush(void);
/* Bytes in the log file now (0 on stderr). */
long log_size(void);
/* Rotate the log file (ft_rotate, KEEP old ones) and go on in a new one.
 * 0, or -1 with errno (the log goes on where it was). */
int log_rotate(int keep);

#endif
