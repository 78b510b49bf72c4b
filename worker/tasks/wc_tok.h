/*
 * wc_tok: what a word is, how it is folded, and its hash.
 *
 * A word is a maximal run of word bytes.  By default the word bytes are
 * [A-Za-z0-9] and 0x80-0xFF; with a separator set (the bytes of a
 * delimiter file) every byte outside the set is a word byte.  A-Z are
 * folded to a-z, every other byte is kept as is.
 *
 * The hash is computed over the folded word, 8 bytes at a time.  Words are
 * read with whole 8-byte loads: every buffer that holds a word must have
 * WC_PAD readable bytes after the word's last byte (their values do not
 * matter; they are masked off).  The hash decides the reducer of a word,
 * so it must be the same on every worker: all workers of a job must share
 * one byte order (little-endian: short words are kept as loaded values).
 */
#ifndef WC_TOK_H
#define WC_TOK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the wordcount task assumes a little-endian machine"
#endif

#define WC_PAD 24		/* readable slack after a word, in bytes */
#define WC_SEPS_HEX 64		/* hex digits of an encoded separator set */

struct wc_class {
	uint8_t word[256];	/* 1: word byte, 0: separator */
	/* The same as nibble tables, for SIMD: bit h of lo8[l] tells whether
	 * byte h * 16 + l is a word byte (h < 8), bit h - 8 of hi8[l] for
	 * h >= 8. */
	uint8_t lo8[16], hi8[16];
};

/* Word-byte masks of NBLOCKS blocks of 64 bytes from P: bit k of OUT[j]
 * is set when P[64 * j + k] is a word byte.  The blocks are folded in
 * place on the way ('A'..'Z' to 'a'..'z'). */
typedef void (*wc_masks_fn)(const struct wc_class *c, uint8_t *p,
			    size_t nblocks, uint64_t *out);
/* The fastest implementation this CPU runs. */
wc_masks_fn wc_masks_pick(void);
/* The portable one (for tests). */
void wc_masks_scalar(const struct wc_class *c, uint8_t *p, size_t nblocks,
		     uint64_t *out);

/* The default word bytes: [A-Za-z0-9] and 0x80-0xFF. */
void wc_class_default(struct wc_class *c);
/* Word bytes are the bytes outside SET (32 bytes, bit b%8 of byte b/8). */
void wc_class_from_set(struct wc_class *c, const uint8_t set[32]);
/* Encode SET as WC_SEPS_HEX lower-case hex digits (OUT: 65 bytes). */
void wc_set_to_hex(const uint8_t set[32], char *out);
/* Decode HEX into SET.  0, or -1 if HEX is not WC_SEPS_HEX hex digits. */
int wc_set_from_hex(const char *hex, uint8_t set[32]);
/* The set of the bytes of DATA (N bytes). */
void wc_set_of_bytes(const void *data, size_t n, uint8_t set[32]);

#define WC_K0 0x9e3779b97f4a7c15ULL
#define WC_K1 0xff51afd7ed558ccdULL
#define WC_K2 0xc4ceb9fe1a85ec53ULL
#define WC_LOW7 0x7f7f7f7f7f7f7f7fULL
#define WC_HIGH 0x8080808080808080ULL

/* Masks keeping the first N bytes of three loaded values (N <= 24). */
extern const uint64_t wc_masks24[25][3];

/* 8 bytes at P as a value. */
static inline uint64_t
wc_load(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w;
}

/* W with its bytes 'A'..'Z' folded to 'a'..'z' (SWAR). */
static inline uint64_t
wc_fold8(uint64_t w)
{
	uint64_t low = w & WC_LOW7;
	uint64_t ge_a = low + 0x3f3f3f3f3f3f3f3fULL;	/* >= 0x41 */
	uint64_t gt_z = low + 0x2525252525252525ULL;	/* >= 0x5b */

	return w | ((ge_a & ~gt_z & ~w & WC_HIGH) >> 2);
}

/* Mask keeping the first N bytes of a loaded value (1 <= N <= 8). */
static inline uint64_t
wc_mask(size_t n)
{
	return ~0ULL >> ((8 - n) * 8);
}

/* The first 8 bytes of the word P[0..N) (N >= 1, 8 bytes readable),
 * zero-padded, big-endian: compared as integers they order words as
 * memcmp does, but for ties where the padding meets real zero bytes.
 * The reducers' sort and the merge must order words alike. */
static inline uint64_t
wc_prefix(const uint8_t *p, size_t n)
{
	return __builtin_bswap64(wc_load(p) & (n >= 8 ? ~0ULL : wc_mask(n)));
}

static inline uint64_t
wc_round(uint64_t h, uint64_t w)
{
	return (h ^ w) * WC_K1;
}

static inline uint64_t
wc_final(uint64_t h)
{
	h ^= h >> 32;
	h *= WC_K2;
	h ^= h >> 29;
	return h;
}

/* Hash of a word of N <= 24 bytes given as its three folded, masked
 * 8-byte chunks: two multiplies side by side (the third chunk, rare, is
 * rotated into the second) and no finishing round.  So its low bits
 * depend on the chunks' low bits only: tables index by the top bits
 * (wc_home), and a word's reducer is taken from bits 32 and up. */
static inline uint64_t
wc_hash24(const uint64_t w[3], size_t n)
{
	return (w[0] ^ n) * WC_K1 ^ (w[1] ^ (w[2] << 29 | w[2] >> 35)) * WC_K2;
}

/* Hash of the word P[0..N) (folded on the fly; N >= 1, WC_PAD bytes of
 * slack after it): wc_hash24 up to 24 bytes, a round per chunk beyond. */
static inline uint64_t
wc_hash(const uint8_t *p, size_t n)
{
	uint64_t w[3], h = (uint64_t)n * WC_K0;
	size_t i;

	if (n <= 24) {
		for (i = 0; i < 3; i++)
			w[i] = wc_fold8(wc_load(p + 8 * i)) & wc_masks24[n][i];
		return wc_hash24(w, n);
	}
	for (i = 0; i + 8 <= n; i += 8)
		h = wc_round(h, wc_fold8(wc_load(p + i)));
	if (i < n)
		h = wc_round(h, wc_fold8(wc_load(p + i)) & wc_mask(n - i));
	return wc_final(h);
}

#endif
