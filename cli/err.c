/* err: see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

void
cli_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ftfarm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
