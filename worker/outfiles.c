/* outfiles: the files of a task's outputs (outfiles.h). */
#include "outfiles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jcheck.h"
#include "outpath.h"
#include "util.h"

/* The path of KEY's file for task SPEC (its pattern, else DEF) into OUT
 * (OUTPATH_MAX bytes).  1 when there is one, 0 when none, -1 with WHY. */
static int
path_for(const json_t *spec, const char *key, const char *def,
	 const struct outfiles_who *who, char *out, char *why, size_t n)
{
	const char *pat = jget_str(spec, key, def && *def ? def : NULL);
	const char *cwd = jget_str(spec, "cwd", NULL);
	char expanded[OUTPATH_MAX];
	int rc;

	if (pat == NULL)
		return 0;
	rc = outpath_expand(pat, who->batch, who->index, who->attempt,
			    who->node, who->node_len, expanded);
	if (rc == 0 && (expanded[0] == '/' || cwd == NULL))
		rc = ft_snprintf(out, OUTPATH_MAX, "%s", expanded);
	else if (rc == 0)
		rc = ft_snprintf(out, OUTPATH_MAX, "%s/%s", cwd, expanded);
	if (rc == 0)
		return 1;
	ft_snprintf(why, n, "%s: its path is longer than %d bytes", key,
		    OUTPATH_MAX - 1);
	return -1;
}

/* Open PATH for KEY's output: a new descriptor above 2, or -1 with
 * WHY.  Read and write, for its tail; write only where reading is not
 * allowed (no tail then).  Appending: whatever the task itself writes
 * into the same file (a Snakemake rule into its log) is not written
 * over. */
static int
open_out(const char *key, const char *path, char *why, size_t n)
{
	const int flags = O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOCTTY;
	int fd = open(path, O_RDWR | flags, 0666);

	if (fd < 0 && errno == EACCES)
		fd = open(path, O_WRONLY | flags, 0666);

	if (fd >= 0 && fd <= 2) {
		int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);

		close(fd);
		fd = high;
	}
	if (fd < 0)
		ft_snprintf(why, n, "%s: cannot open %s: %s", key, path,
			    strerror(errno));
	return fd;
}

int
outfiles_open(struct outfiles *of, const json_t *spec,
	      const struct outfiles_who *who, char *why, size_t n)
{
	char out[OUTPATH_MAX], err[OUTPATH_MAX];
	int has_out, has_err;

	memset(of, 0, sizeof(*of));
	if ((has_out = path_for(spec, "stdout", who->out_default, who, out,
				why, n)) == -1 ||
	    (has_err = path_for(spec, "stderr", who->err_default, who, err,
				why, n)) == -1)
		return -1;
	if (has_out && (of->out_fd = open_out("stdout", out, why, n)) < 0)
		goto fail;
	if (has_err && has_out && strcmp(out, err) == 0)
		of->err_fd = of->out_fd;	/* one file, one offset */
	else if (has_err &&
		 (of->err_fd = open_out("stderr", err, why, n)) < 0)
		goto fail;
	of->out_path = has_out ? ft_strdup(out) : NULL;
	of->err_path = has_err ? ft_strdup(err) : NULL;
	return 0;
fail:
	if (of->out_fd > 2)
		close(of->out_fd);
	memset(of, 0, sizeof(*of));
	return -1;
}

/* The last CAP bytes of the file FD, into *DATA (malloc'd, NUL-
 * terminated; NULL when empty) and *LEN. */
static void
tail_of(int fd, size_t cap, char **data, size_t *len)
{
	struct stat st;
	off_t from;
	ssize_t got;

	free(*data);
	*data = NULL;
	*len = 0;
	if (cap == 0 || fstat(fd, &st) == -1 || st.st_size <= 0)
		return;
	from = st.st_size > (off_t)cap ? st.st_size - (off_t)cap : 0;
	*data = ft_malloc((size_t)(st.st_size - from) + 1);
	got = pread(fd, *data, (size_t)(st.st_size - from), from);
	*len = got > 0 ? (size_t)got : 0;
	(*data)[*len] = '\0';
}

void
outfiles_tails(const struct outfiles *of, size_t cap, struct ft_result *res)
{
	if (of->out_fd > 2)
		tail_of(of->out_fd, cap, &res->out, &res->out_len);
	if (of->err_fd > 2)
		tail_of(of->err_fd, cap, &res->err, &res->err_len);
}

/* Copy the file FD from its start to the end of DST.  0 or -1. */
static int
copy_into(int fd, int dst)
{
	char buf[65536];
	off_t off = 0;
	ssize_t got;

	while ((got = pread(fd, buf, sizeof(buf), off)) > 0) {
		if (ft_write_all(dst, buf, (size_t)got) == -1)
			return -1;
		off += got;
	}
	return got < 0 ? -1 : 0;
}

/* FD's file should be at PATH: when something removed or replaced it
 * while the task ran, what the task wrote is appended to the file PATH
 * names now (made again if need be). */
static void
put_back(int fd, const char *path)
{
	struct stat mine, there;
	int dst;

	if (fstat(fd, &mine) == -1 || !S_ISREG(mine.st_mode) ||
	    mine.st_size == 0 ||
	    (stat(path, &there) == 0 && there.st_dev == mine.st_dev &&
	     there.st_ino == mine.st_ino))
		return;
	dst = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
		   0666);
	if (dst < 0)
		return;
	(void)copy_into(fd, dst);
	close(dst);
}

void
outfiles_keep(const struct outfiles *of)
{
	if (of->out_fd > 2)
		put_back(of->out_fd, of->out_path);
	if (of->err_fd > 2 && of->err_fd != of->out_fd)
		put_back(of->err_fd, of->err_path);
}

void
outfiles_close(struct outfiles *of)
{
	if (of->err_fd > 2 && of->err_fd != of->out_fd)
		close(of->err_fd);
	if (of->out_fd > 2)
		close(of->out_fd);
	of->out_fd = of->err_fd = 0;
}
