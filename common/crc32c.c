/* crc32c: the Castagnoli CRC (see crc32c.h). */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u	/* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void
init(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			table[j][i] = (table[j - 1][i] >> 8) ^
				      table[0][table[j - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* Eight bytes at a time through eight tables (little-endian words). */
static uint32_t
soft(uint32_t c, const unsigned char *p, size_t len)
{
	while (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		    table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		    table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		    table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
hard(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t c64 = c;

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		len -= 8;
	}
	c = (uint32_t)c64;
	while (len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t
crc32c(uint32_t crc, const void *p, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&once, init);
#if defined(__x86_64__)
	if (hw)
		return ~hard(c, p, len);
#endif
	return ~soft(c, p, len);
}
