/* outpath: the files of a task's outputs (outpath.h). */
#include "outpath.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

int
outpath_check(const char *pattern, char *why, size_t n)
{
	const char *p;

	if (*pattern == '\0')
		return ft_snprintf(why, n, "must not be empty"), -1;
	if (strlen(pattern) >= OUTPATH_MAX)
		return ft_snprintf(why, n, "longer than %d bytes",
				   OUTPATH_MAX - 1), -1;
	for (p = strchr(pattern, '%'); p; p = strchr(p + 2, '%'))
		if (p[1] == '\0' || strchr("btan%", p[1]) == NULL) {
			ft_snprintf(why, n, "\"%%%.1s\" is no placeholder (%%b "
				    "batch, %%t task, %%a attempt, %%n node, "
				    "%%%% a %%)", p + 1);
			return -1;
		}
	return 0;
}

/* Append LEN bytes of S to OUT at *O.  0, or -1 when they do not fit. */
static int
put(char *out, size_t *o, const char *s, size_t len)
{
	if (*o + len >= OUTPATH_MAX)
		return -1;
	memcpy(out + *o, s, len);
	*o += len;
	return 0;
}

/* The same for a number. */
static int
put_u32(char *out, size_t *o, uint32_t v)
{
	char num[16];
	int len = snprintf(num, sizeof(num), "%u", v);

	return put(out, o, num, (size_t)len);
}

int
outpath_expand(const char *pattern, uint32_t batch, uint32_t index,
	       uint32_t attempt, const char *node, size_t nlen, char *out)
{
	const char *p = pattern;
	size_t o = 0;
	int rc = 0, with_attempt = 0;

	while (rc == 0 && *p) {
		const char *pct = strchr(p, '%');
		size_t lit = pct ? (size_t)(pct - p) : strlen(p);

		rc = put(out, &o, p, lit);
		p += lit;
		if (rc || *p == '\0')
			break;
		switch (p[1]) {
		case 'b': rc = put_u32(out, &o, batch); break;
		case 't': rc = put_u32(out, &o, index); break;
		case 'a': rc = put_u32(out, &o, attempt); with_attempt = 1;
			  break;
		case 'n': rc = put(out, &o, node, nlen); break;
		default: rc = put(out, &o, "%", 1); break;
		}
		p += p[1] ? 2 : 1;
	}
	if (rc == 0 && !with_attempt && attempt > 1 &&
	    (rc = put(out, &o, ".", 1)) == 0)
		rc = put_u32(out, &o, attempt);
	out[rc ? 0 : o] = '\0';
	return rc;
}
