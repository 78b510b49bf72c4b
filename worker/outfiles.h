/*
 * outfiles: the files a task's standard output and error go to, on the
 * node that runs it.
 *
 * Its "stdout" and "stderr" (or the config's "task_stdout" and
 * "task_stderr" when it names none) are patterns (outpath.h), expanded
 * for the attempt and opened (created, or truncated) before the task
 * starts; a relative path is taken from the task's "cwd" when it has
 * one.  The command writes them itself, with no cap; once it has ended
 * the result gets the path and the file's last bytes (output_cap), where
 * the pipe's first bytes went before.  The same path for both shares one
 * file.  A file removed or replaced while the task ran (Snakemake removes
 * a rule's log before its job runs, and the rule may write a new one)
 * gets what the task wrote appended to whatever is at its path then.
 */
#ifndef FT_OUTFILES_H
#define FT_OUTFILES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin.h"

/* What the task is and where it runs, for the patterns. */
struct outfiles_who {
	uint32_t batch, index, attempt;
	const char *node;
	size_t node_len;
	const char *out_default;	/* patterns when the task has none, */
	const char *err_default;	/* or NULL */
};

struct outfiles {
	int out_fd, err_fd;		/* above 2, or 0: no file */
	char *out_path, *err_path;	/* malloc'd, or NULL */
};

/* Open the files of task SPEC for WHO into OF (zeroed by the call).  0,
 * or -1 with WHY ("stdout: cannot open PATH: ..."), nothing left open. */
int outfiles_open(struct outfiles *of, const json_t *spec,
		  const struct outfiles_who *who, char *why, size_t n);
/* RES's kept outputs become the last CAP bytes of OF's files (for those
 * the task had). */
void outfiles_tails(const struct outfiles *of, size_t cap,
		    struct ft_result *res);
/* Put what the task wrote back at OF's paths where its files were
 * removed or replaced meanwhile. */
void outfiles_keep(const struct outfiles *of);
/* Close OF's files; its paths stay (the caller's to free). */
void outfiles_close(struct outfiles *of);

#endif
