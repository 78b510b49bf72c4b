/* wc_tok: byte classes and separator sets of the wordcount task. */
#include "wc_tok.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#endif

#define M(n) (~0ULL >> ((8 - (n)) * 8))
const uint64_t wc_masks24[25][3] = {
	{ 0, 0, 0 },
	{ M(1), 0, 0 }, { M(2), 0, 0 }, { M(3), 0, 0 }, { M(4), 0, 0 },
	{ M(5), 0, 0 }, { M(6), 0, 0 }, { M(7), 0, 0 }, { M(8), 0, 0 },
	{ M(8), M(1), 0 }, { M(8), M(2), 0 }, { M(8), M(3), 0 },
	{ M(8), M(4), 0 }, { M(8), M(5), 0 }, { M(8), M(6), 0 },
	{ M(8), M(7), 0 }, { M(8), M(8), 0 },
	{ M(8), M(8), M(1) }, { M(8), M(8), M(2) }, { M(8), M(8), M(3) },
	{ M(8), M(8), M(4) }, { M(8), M(8), M(5) }, { M(8), M(8), M(6) },
	{ M(8), M(8), M(7) }, { M(8), M(8), M(8) },
};
#undef M

static int
default_word_byte(int b)
{
	return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') ||
	       (b >= '0' && b <= '9') || b >= 0x80;
}

/* Derive the nibble tables of C from its byte table. */
static void
class_nibbles(struct wc_class *c)
{
	int b;

	memset(c->lo8, 0, sizeof(c->lo8));
	memset(c->hi8, 0, sizeof(c->hi8));
	for (b = 0; b < 256; b++) {
		if (!c->word[b])
			continue;
		if (b < 128)
			c->lo8[b & 15] |= (uint8_t)(1u << (b >> 4));
		else
			c->hi8[b & 15] |= (uint8_t)(1u << ((b >> 4) - 8));
	}
}

void
wc_class_default(struct wc_class *c)
{
	int b;

	for (b = 0; b < 256; b++)
		c->word[b] = (uint8_t)default_word_byte(b);
	class_nibbles(c);
}

void
wc_class_from_set(struct wc_class *c, const uint8_t set[32])
{
	int b;

	for (b = 0; b < 256; b++)
		c->word[b] = !(set[b >> 3] & (1u << (b & 7)));
	class_nibbles(c);
}

void
wc_masks_scalar(const struct wc_class *c, uint8_t *p, size_t nblocks,
		uint64_t *out)
{
	size_t j, k;
	uint64_t m, w;

	for (j = 0; j < nblocks; j++, p += 64) {
		m = 0;
		for (k = 0; k < 64; k++)
			m |= (uint64_t)c->word[p[k]] << k;
		out[j] = m;
		for (k = 0; k < 64; k += 8) {
			w = wc_fold8(wc_load(p + k));
			memcpy(p + k, &w, 8);
		}
	}
}

#ifdef HAVE_AVX2_PATH
/* Word bytes among the 32 bytes at P, by the nibble tables: the low
 * nibble picks a row of 8 bits, the high nibble a bit of it. */
__attribute__((target("avx2")))
static inline uint32_t
mask32_avx2(__m256i lo8, __m256i hi8, __m256i bits, uint8_t *p)
{
	const __m256i low = _mm256_set1_epi8(0x0f);
	__m256i v = _mm256_loadu_si256((const __m256i *)p);
	/* Fold: 'A'..'Z' are the bytes whose value minus 'A' (signed)
	 * lies in [-128, -128 + 25] once shifted by 128 + 'A'. */
	__m256i sh = _mm256_sub_epi8(v, _mm256_set1_epi8((char)(0x80 + 'A')));
	__m256i up = _mm256_cmpgt_epi8(_mm256_set1_epi8(-128 + 26), sh);

	_mm256_storeu_si256((__m256i *)p, _mm256_or_si256(v,
			    _mm256_and_si256(up, _mm256_set1_epi8(0x20))));
	__m256i lo = _mm256_and_si256(v, low);
	__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
	__m256i row_lo = _mm256_shuffle_epi8(lo8, lo);
	__m256i row_hi = _mm256_shuffle_epi8(hi8, lo);
	__m256i upper = _mm256_cmpgt_epi8(hi, _mm256_set1_epi8(7));
	__m256i row = _mm256_blendv_epi8(row_lo, row_hi, upper);
	__m256i bit = _mm256_shuffle_epi8(bits, hi);
	__m256i sep = _mm256_cmpeq_epi8(_mm256_and_si256(row, bit),
					_mm256_setzero_si256());

	return ~(uint32_t)_mm256_movemask_epi8(sep);
}

__attribute__((target("avx2")))
static void
masks_avx2(const struct wc_class *c, uint8_t *p, size_t nblocks,
	   uint64_t *out)
{
	__m128i l = _mm_loadu_si128((const __m128i *)c->lo8);
	__m128i h = _mm_loadu_si128((const __m128i *)c->hi8);
	__m128i b = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128,
				  1, 2, 4, 8, 16, 32, 64, -128);
	__m256i lo8 = _mm256_broadcastsi128_si256(l);
	__m256i hi8 = _mm256_broadcastsi128_si256(h);
	__m256i bits = _mm256_broadcastsi128_si256(b);
	size_t j;

	for (j = 0; j < nblocks; j++, p += 64)
		out[j] = (uint64_t)mask32_avx2(lo8, hi8, bits, p) |
			 (uint64_t)mask32_avx2(lo8, hi8, bits, p + 32) << 32;
}
#endif

wc_masks_fn
wc_masks_pick(void)
{
#ifdef HAVE_AVX2_PATH
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2"))
		return masks_avx2;
#endif
	return wc_masks_scalar;
}

void
wc_set_to_hex(const uint8_t set[32], char *out)
{
	static const char digits[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = digits[set[i] >> 4];
		out[2 * i + 1] = digits[set[i] & 15];
	}
	out[WC_SEPS_HEX] = '\0';
}

static int
hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
wc_set_from_hex(const char *hex, uint8_t set[32])
{
	int i, hi, lo;

	if (strlen(hex) != WC_SEPS_HEX)
		return -1;
	for (i = 0; i < 32; i++) {
		hi = hex_digit(hex[2 * i]);
		lo = hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		set[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void
wc_set_of_bytes(const void *data, size_t n, uint8_t set[32])
{
	const uint8_t *p = data;
	size_t i;

	memset(set, 0, 32);
	for (i = 0; i < n; i++)
		set[p[i] >> 3] |= (uint8_t)(1u << (p[i] & 7));
}
