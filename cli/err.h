/*
 * err: how ftfarm's commands report a failure to the user.
 */
#ifndef FT_CLI_ERR_H
#define FT_CLI_ERR_H

/* Print "ftfarm: MSG" and a newline to stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
