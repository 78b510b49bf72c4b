/* gang_data: the data gang jobs read, generate and write (see gang_data.h). */
#include "gang_data.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gang data files are little-endian; this host is not"
#endif

uint64_t
gdata_z(uint64_t seed, uint64_t i)
{
	uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void
gdata_doubles(uint64_t seed, uint64_t first, double *out, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		uint64_t z = gdata_z(seed, first + k);
		double u = (double)(z >> 11) * 0x1p-53;

		out[k] = ldexp(u - 0.5, (int)(z & 31) - 10);
	}
}

void
gdata_bytes(uint64_t seed, uint64_t first, unsigned char *out, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		uint64_t i = first + k;

		out[k] = (unsigned char)(gdata_z(seed, i / 8) >> (8 * (i % 8)));
	}
}

uint64_t
gdata_digest(const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t k;

	for (k = 0; k < n; k++) {
		h ^= c[k];
		h *= 0x100000001b3ull;
	}
	return h;
}

int
gdata_read_at(const char *path, uint64_t off, void *buf, size_t n, char *err,
	      size_t en)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t r = 0;

	if (fd == -1) {
		snprintf(err, en, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (got < n) {
		r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got < n)
		snprintf(err, en, "%s: %s", path,
			 r == -1 ? strerror(errno) : "file too short");
	close(fd);
	return got < n ? -1 : 0;
}
