/*
 * Unit tests of the wordcount plugin's pieces: the SIMD and portable byte
 * classifiers agree, the hash is the same whichever way a word reaches it,
 * the table counts (short, long and huge words, growth) and sorts, record
 * files detect truncation, manifest paths round-trip, shards are cut as
 * documented, whole jobs (run in-process through the plugin's hooks)
 * count what a naive counter counts for every shard size, and a map given
 * the table its worker kept from another map writes its own words only.
 *
 * The plugin's sources are compiled in (the plugin is a shared object);
 * the job test loads the built plugin as the master does.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tasks/wc_file.c"
#include "tasks/wc_plan.c"
#include "tasks/wc_table.c"
#include "tasks/wc_task.c"
#include "tasks/wc_tok.c"

#include "jobs.h"

#ifndef FT_TEST_BINDIR
#error "build with -DFT_TEST_BINDIR='\"/abs/path/bin\"'"
#endif

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t
rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* ---- classes ---- */

static void
check_masks(const struct wc_class *c)
{
	uint8_t a[64 * 9 + 64], b[64 * 9 + 64];
	uint64_t ma[9], mb[9];
	wc_masks_fn fast = wc_masks_pick();
	size_t i, k;

	for (k = 0; k < 50; k++) {
		for (i = 0; i < sizeof(a); i++)
			a[i] = k < 25 ? (uint8_t)rnd()
				      : (uint8_t)"aZ 9,\xc3\xa9\n"[rnd() % 8];
		memcpy(b, a, sizeof(a));
		wc_masks_scalar(c, a, 9, ma);
		fast(c, b, 9, mb);
		assert_memory_equal(ma, mb, sizeof(ma));
		assert_memory_equal(a, b, 64 * 9);
		for (i = 0; i < 64 * 9; i++) {
			assert_int_equal((ma[i / 64] >> (i % 64)) & 1,
					 c->word[b[i]]);
			assert_false(a[i] >= 'A' && a[i] <= 'Z');
		}
	}
}

static void
test_masks_agree(void **state)
{
	struct wc_class c;
	uint8_t set[32];

	(void)state;
	wc_class_default(&c);
	assert_true(c.word['a'] && c.word['Z'] && c.word['0'] && c.word[0x80]);
	assert_false(c.word[' '] || c.word['-'] || c.word[0] || c.word[0x7f]);
	check_masks(&c);
	wc_set_of_bytes(" \n\xc3\x00", 4, set);
	wc_class_from_set(&c, set);
	assert_false(c.word[' '] || c.word[0xc3] || c.word[0]);
	assert_true(c.word[','] && c.word[0xa9] && c.word['a']);
	check_masks(&c);
}

static void
test_separator_hex(void **state)
{
	uint8_t set[32], back[32];
	char hex[WC_SEPS_HEX + 1];

	(void)state;
	wc_set_of_bytes("\x00\xff;=", 4, set);
	wc_set_to_hex(set, hex);
	assert_int_equal(strlen(hex), WC_SEPS_HEX);
	assert_int_equal(wc_set_from_hex(hex, back), 0);
	assert_memory_equal(set, back, 32);
	assert_int_equal(wc_set_from_hex("12", back), -1);
	hex[3] = 'x';
	assert_int_equal(wc_set_from_hex(hex, back), -1);
}

/* ---- hash ---- */

static void
test_hash_paths_agree(void **state)
{
	uint8_t raw[200 + WC_PAD], low[200 + WC_PAD];
	struct wc_word w1, w2;
	size_t n, i, k;

	(void)state;
	for (k = 0; k < 200; k++) {
		n = 1 + rnd() % 60;
		for (i = 0; i < sizeof(raw); i++) {
			raw[i] = (uint8_t)("AbCzZ\xd0\xbf" "09"[rnd() % 9]);
			low[i] = raw[i] >= 'A' && raw[i] <= 'Z' ? raw[i] + 32
								: raw[i];
		}
		/* Garbage after the word must not matter. */
		memset(low + n, 0x5a, WC_PAD);
		wc_word_prep(&w1, raw, n, 0);
		wc_word_prep(&w2, low, n, 1);
		assert_int_equal(w1.h, w2.h);
		assert_int_equal(w1.h, wc_hash(low, n));
		assert_int_equal(w1.h, wc_hash(raw, n));
	}
}

/* ---- table ---- */

static uint64_t
count_of(struct wc_table *t, const char *word, size_t n)
{
	struct wc_slot **l = wc_table_list(t);
	const uint8_t *w;
	size_t i, len;
	uint64_t c = 0;

	for (i = 0; i < t->used; i++) {
		w = wc_slot_word(l[i], &len);
		if (len == n && memcmp(w, word, n) == 0)
			c = wc_slot_count(l[i]);
	}
	free(l);
	return c;
}

static void
add(struct wc_table *t, const char *s, size_t n)
{
	uint8_t *b = calloc(1, n + WC_PAD);

	memcpy(b, s, n);
	wc_table_add(t, b, n, 1);
	free(b);
}

static void
test_table_counts(void **state)
{
	struct wc_table t;
	char word[32], *huge = malloc(100000);
	size_t i;

	(void)state;
	wc_table_init(&t, 0);
	for (i = 0; i < 3; i++) {
		add(&t, "Hello", 5);
		add(&t, "hELLO", 5);
		add(&t, "a-twenty-four-byte-word!", 24);
		add(&t, "A-TWENTY-FIVE-BYTE-WORD!!", 25);
	}
	memset(huge, 'Q', 100000);
	add(&t, huge, 100000);
	memset(huge, 'q', 100000);
	add(&t, huge, 100000);
	for (i = 0; i < 50000; i++) {		/* growth */
		snprintf(word, sizeof(word), "w%zu", i);
		add(&t, word, strlen(word));
	}
	add(&t, "w7", 2);
	assert_int_equal(t.used, 50000 + 4);
	assert_int_equal(t.words, 50000 + 1 + 12 + 2);
	assert_int_equal(count_of(&t, "hello", 5), 6);
	assert_int_equal(count_of(&t, "a-twenty-four-byte-word!", 24), 3);
	assert_int_equal(count_of(&t, "a-twenty-five-byte-word!!", 25), 3);
	assert_int_equal(count_of(&t, huge, 100000), 2);
	assert_int_equal(count_of(&t, "w7", 2), 2);
	assert_int_equal(count_of(&t, "w49999", 6), 1);
	wc_table_free(&t);
	free(huge);
}

static void
test_table_sort(void **state)
{
	static const char *words[] = { "b", "ab", "abc", "a", "ab\0", "z" };
	static const size_t lens[] = { 1, 2, 3, 1, 3, 1 };
	static const char *want[] = { "z", "a", "ab", "ab\0", "abc", "b" };
	struct wc_table t;
	struct wc_slot **l;
	const uint8_t *w;
	size_t i, n;

	(void)state;
	wc_table_init(&t, 0);
	for (i = 0; i < 6; i++)
		add(&t, words[i], lens[i]);
	add(&t, "z", 1);		/* z: 2, then the others by bytes */
	l = wc_table_list(&t);
	wc_table_sort(l, t.used);
	for (i = 0; i < 6; i++) {
		w = wc_slot_word(l[i], &n);
		assert_int_equal(n, strlen(want[i]) + (i == 3));
		assert_memory_equal(w, want[i], n);
	}
	free(l);
	wc_table_free(&t);
}

/* Does slot A come before slot B: count descending, then word bytes
 * (memcmp, a prefix first)? */
static int
slot_before(const struct wc_slot *a, const struct wc_slot *b)
{
	const uint8_t *wa, *wb;
	size_t na, nb;
	int c;

	if (wc_slot_count(a) != wc_slot_count(b))
		return wc_slot_count(a) > wc_slot_count(b);
	wa = wc_slot_word(a, &na);
	wb = wc_slot_word(b, &nb);
	c = memcmp(wa, wb, na < nb ? na : nb);
	return c ? c < 0 : na < nb;
}

/* Counts from 1 to 2^40, many of them shared, words short and long, some
 * with zero bytes: the order holds between every two neighbours, and
 * every word is there once. */
static void
test_table_sort_counts(void **state)
{
	enum { N = 20000 };
	uint8_t b[32 + WC_PAD];
	uint64_t x = 88172645463325252ULL, c, sum = 0, got = 0;
	struct wc_table t;
	struct wc_slot **l;
	size_t i, n;

	(void)state;
	wc_table_init(&t, 0);
	for (i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* shared small counts, and spread ones up to 2^40 */
		c = i % 3 ? 1 + x % 50 : 1 + (x >> 20) % (1ULL << (x % 41));
		memset(b, 0, sizeof(b));
		n = (size_t)snprintf((char *)b, 32, "%c%zu", 'a' + (int)(x % 26),
				     i);
		if (i % 7 == 0)
			n += 20;	/* long words too, zero-padded */
		wc_table_add(&t, b, n, c);
		sum += c;
	}
	assert_int_equal(t.used, N);
	l = wc_table_list(&t);
	wc_table_sort(l, t.used);
	for (i = 0; i < N; i++) {
		got += wc_slot_count(l[i]);
		if (i > 0 && !slot_before(l[i - 1], l[i]))
			fail_msg("slots %zu and %zu out of order", i - 1, i);
	}
	assert_true(got == sum);
	free(l);
	wc_table_free(&t);
}

/* ---- files ---- */

static void
test_record_files(void **state)
{
	struct wc_out o = { 0 };
	struct wc_in in = { 0 };
	const uint8_t *w;
	size_t n;
	uint64_t c;

	(void)state;
	wc_out_record(&o, (const uint8_t *)"word", 4, 300);
	wc_out_record(&o, (const uint8_t *)"x", 1, 1ULL << 60);
	wc_out_finish(&o, 2);
	assert_int_equal(wc_in_open(&in, o.data, o.len), 0);
	assert_int_equal(wc_in_next(&in, &w, &n, &c), 1);
	assert_int_equal(n, 4);
	assert_int_equal(c, 300);
	assert_int_equal(wc_in_next(&in, &w, &n, &c), 1);
	assert_int_equal(c, 1ULL << 60);
	assert_int_equal(wc_in_next(&in, &w, &n, &c), 0);
	/* Truncated anywhere: an error, never a quiet end. */
	for (n = WC_MAGIC_LEN; n < o.len; n++) {
		int rc = 1;

		assert_int_equal(wc_in_open(&in, o.data, n), 0);
		while (rc == 1)
			rc = wc_in_next(&in, &w, &(size_t){ 0 }, &c);
		assert_int_equal(rc, -1);
	}
	assert_int_equal(wc_in_open(&in, (const uint8_t *)"FTWC2\n", 6), -1);
	wc_out_free(&o);
}

/* Records of every word length to 200 and counts about each varint
 * length read back as written, truncated anywhere an error: the inline
 * path for usual records and the general one agree. */
static void
test_record_lengths(void **state)
{
	static const uint64_t counts[] = { 1, 127, 128, 16383, 16384,
					   1ULL << 40 };
	struct wc_out o = { 0 };
	struct wc_in in = { 0 };
	uint8_t word[200];
	const uint8_t *w;
	size_t n, len, k, nrec = 0;
	uint64_t c;
	int rc;

	(void)state;
	for (k = 0; k < sizeof(word); k++)
		word[k] = (uint8_t)('a' + k % 26);
	for (len = 1; len <= sizeof(word); len++)
		for (k = 0; k < 6; k++, nrec++)
			wc_out_record(&o, word, len, counts[k]);
	wc_out_finish(&o, nrec);
	assert_int_equal(wc_in_open(&in, o.data, o.len), 0);
	for (len = 1; len <= sizeof(word); len++) {
		for (k = 0; k < 6; k++) {
			assert_int_equal(wc_in_next(&in, &w, &n, &c), 1);
			assert_int_equal(n, len);
			assert_memory_equal(w, word, len);
			assert_int_equal(c, counts[k]);
		}
	}
	assert_int_equal(wc_in_next(&in, &w, &n, &c), 0);
	for (n = WC_MAGIC_LEN; n < o.len; n += 7) {
		assert_int_equal(wc_in_open(&in, o.data, n), 0);
		while ((rc = wc_in_next(&in, &w, &len, &c)) == 1)
			;
		assert_int_equal(rc, -1);
	}
	wc_out_free(&o);
}

static void
test_path_escape(void **state)
{
	struct ft_buf b = { 0 };
	const char *path = "/a\\b\nc d";

	(void)state;
	wc_path_escape(&b, path);
	ft_buf_add(&b, "", 1);
	assert_string_equal(b.data, "/a\\\\b\\nc d");
	assert_int_equal(wc_path_unescape(b.data), 0);
	assert_string_equal(b.data, path);
	strcpy(b.data, "bad\\x");
	assert_int_equal(wc_path_unescape(b.data), -1);
	ft_buf_free(&b);
}

/* ---- plan ---- */

static void
plan_files(struct wc_plan *p, const uint64_t *sizes, size_t n)
{
	size_t i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < n; i++)
		add_file(p, "/x", sizes[i]);
}

static void
test_plan_shards(void **state)
{
	static const uint64_t sizes[] = { 10, 0, 5, 0, 0, 7 };
	struct wc_plan p;
	char err[256];

	(void)state;
	plan_files(&p, sizes, 6);
	assert_int_equal(p.total, 22);
	assert_int_equal(wc_plan_shards(&p, 0, 5, err, sizeof(err)), 0);
	assert_int_equal(p.nshards, 5);
	assert_int_equal(p.cut[1], 5);
	assert_int_equal(p.cut[5], 22);
	/* A shard at a file's start also holds the empty files before it. */
	assert_int_equal(wc_plan_first_file(&p, 10), 1);
	assert_int_equal(wc_plan_first_file(&p, 15), 3);
	assert_int_equal(wc_plan_first_file(&p, 12), 2);
	assert_int_equal(wc_plan_first_file(&p, 22), 6);
	free(p.cut);
	assert_int_equal(wc_plan_shards(&p, 100, 0, err, sizeof(err)), 0);
	assert_int_equal(p.nshards, 22);	/* no empty shards */
	free(p.cut);
	assert_int_equal(wc_plan_shards(&p, 3, 0, err, sizeof(err)), 0);
	assert_int_equal(p.cut[1], 7);
	assert_int_equal(p.cut[2], 14);
	wc_plan_free(&p);
	plan_files(&p, sizes, 0);
	assert_int_equal(wc_plan_shards(&p, 0, 0, err, sizeof(err)), 0);
	assert_int_equal(p.nshards, 1);
	wc_plan_free(&p);
	assert_int_equal(wc_plan_default_shards(0), 1);
	assert_int_equal(wc_plan_default_shards(3 << 20), 3);
	assert_int_equal(wc_plan_default_shards(100 << 20), 12);
	assert_int_equal(wc_plan_default_shards(300ULL << 20), 12);
	assert_int_equal(wc_plan_default_shards(1ULL << 30), 32);
	assert_int_equal(wc_plan_default_shards(1ULL << 40), 1024);
	plan_files(&p, (const uint64_t[]){ 1ULL << 40 }, 1);
	assert_int_equal(wc_plan_shards(&p, 0, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than"));
	wc_plan_free(&p);
}

/* ---- whole jobs through the plugin's hooks ---- */

static const struct ft_plugin *plugin;

/* Run JOB in-process through the master's phase engine; 0 when every
 * task succeeded. */
static int
run_job(const char *job_text, const char *dir)
{
	json_t *job = json_loads(job_text, 0, NULL), *tasks = NULL, *t;
	const struct ft_plugin *one[] = { plugin };
	struct ft_plugins pl = { .v = one, .n = 1 };
	enum job_step step = JOB_PHASE;
	struct job *j;
	char err[512];
	uint32_t base = 0;
	size_t i;

	j = job_start(plugin, &pl, job, dir, &tasks, err, sizeof(err));
	if (j == NULL)
		fprintf(stderr, "job_start: %s\n", err);
	assert_non_null(j);
	while (step == JOB_PHASE) {
		json_t *phase = tasks;

		tasks = NULL;
		step = JOB_RUNNING;
		json_array_foreach(phase, i, t) {
			volatile int cancel = 0;
			struct ft_task task = { .id = i, .attempt = 1,
						.spec = t, .cancel = &cancel,
						.output_cap = 65536 };
			struct ft_result r;

			memset(&r, 0, sizeof(r));
			plugin->run(&task, &r);
			step = job_task_ended(j, base + (uint32_t)i, r.ok,
					      r.out, r.out_len, r.reason,
					      &tasks);
			free(r.out);
			free(r.err);
		}
		base += (uint32_t)json_array_size(phase);
		json_decref(phase);
	}
	job_free(j);
	json_decref(job);
	return step == JOB_COMPLETE ? 0 : -1;
}

/* Total of the counts in the output file PATH, and its line count. */
static void
output_totals(const char *path, uint64_t *words, size_t *lines)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, *tab;
	size_t cap = 0;

	*words = 0;
	*lines = 0;
	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		tab = strrchr(line, '\t');
		assert_non_null(tab);
		*words += strtoull(tab + 1, NULL, 10);
		(*lines)++;
	}
	free(line);
	fclose(f);
}

/* Load the built plugin into PLUGIN, as the master does. */
static void
load_plugin(void)
{
	void *h = dlopen(FT_TEST_BINDIR "/tasks/wordcount.so", RTLD_NOW);

	assert_non_null(h);
	plugin = ((const struct ft_plugin *(*)(void))dlsym(h,
						     FT_PLUGIN_SYMBOL))();
	assert_non_null(plugin);
}

/* Write TEXTS[i] as DIR/in/fI, for I < N. */
static void
write_texts(const char *dir, const char *const *texts, size_t n)
{
	char path[300];
	size_t i;
	FILE *f;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/in/f%zu", dir, i);
		ft_mkdirs(ft_dirname(path));
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(texts[i], f);
		fclose(f);
	}
}

static void
test_jobs_every_shard_size(void **state)
{
	char dir[] = "/tmp/ftfarm-wc-unit-XXXXXX", job[1024];
	char jd[320], out[320];
	static const char *const texts[] = { "Ab cd  EFG\nhij,k l", "x",
					     "", "yy zz ab", " a " };
	size_t i, lines, want_lines = 0;
	uint64_t words;

	(void)state;
	load_plugin();
	assert_non_null(mkdtemp(dir));
	write_texts(dir, texts, 5);
	/* Words: ab cd efg hij k l x yy zz ab a = 11, 10 distinct. */
	want_lines = 10;
	snprintf(out, sizeof(out), "%s/out", dir);
	for (i = 1; i <= 40; i++) {
		snprintf(jd, sizeof(jd), "%s/job%zu", dir, i);
		ft_mkdirs(jd);
		snprintf(job, sizeof(job), "{\"type\": \"wordcount\", "
			 "\"inputs\": [\"%s/in\"], \"output\": \"%s\", "
			 "\"shard_bytes\": %zu, \"reducers\": %zu}", dir, out,
			 i, 1 + i % 4);
		assert_int_equal(run_job(job, jd), 0);
		output_totals(out, &words, &lines);
		assert_int_equal(words, 11);
		assert_int_equal(lines, want_lines);
	}
	snprintf(job, sizeof(job), "rm -rf '%s'", dir);
	assert_int_equal(system(job), 0);
}

/* The bytes of the file PATH (NUL-terminated), and their number. */
static char *
slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *data;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	rewind(f);
	data = malloc((size_t)len + 1);
	assert_int_equal(fread(data, 1, (size_t)len, f), (size_t)len);
	data[len] = '\0';
	fclose(f);
	*n = (size_t)len;
	return data;
}

/* Write LEN bytes of words and separators of every kind to PATH (a
 * pseudo-random text from SEED); the number of words it holds. */
static uint64_t
write_text(const char *path, size_t len, uint32_t seed)
{
	static const char seps[] = " \n\t,.  \r\n-";
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
				    "QRSTUVWXYZ0123456789\xc3\xa9\xd0\xbf";
	FILE *f = fopen(path, "wb");
	uint64_t words = 0;
	size_t i = 0, k, wl;

	assert_non_null(f);
	while (i < len) {
		seed = seed * 1103515245u + 12345u;
		/* Mostly short words; now and then one of up to 100 bytes. */
		wl = (seed >> 16) % 16 == 0 ? 1 + (seed >> 8) % 100
					     : 1 + (seed >> 20) % 9;
		for (k = 0; k < wl && i < len; k++, i++) {
			seed = seed * 1103515245u + 12345u;
			fputc(alpha[(seed >> 16) % (sizeof(alpha) - 1)], f);
		}
		words++;
		seed = seed * 1103515245u + 12345u;
		for (k = 0; k < 1 + (seed >> 28) % 3 && i < len; k++, i++)
			fputc(seps[(seed >> (8 + 2 * k)) % (sizeof(seps) - 1)],
			      f);
	}
	fclose(f);
	return words;
}

/* Run the wordcount job on the files of IN into OUT with SHARD_BYTES. */
static void
run_sharded(const char *dir, const char *in, const char *out,
	    size_t shard_bytes, int n)
{
	char job[1024], jd[320];

	snprintf(jd, sizeof(jd), "%s/job%d", dir, n);
	ft_mkdirs(jd);
	snprintf(job, sizeof(job), "{\"type\": \"wordcount\", "
		 "\"inputs\": [\"%s\"], \"output\": \"%s\", "
		 "\"shard_bytes\": %zu, \"reducers\": %d}", in, out,
		 shard_bytes, 1 + n % 3);
	assert_int_equal(run_job(job, jd), 0);
}

/* Sharding the text of LEN bytes (pseudo-random from SEED, in two files
 * under DIR/NAME) in each of SIZES (N of them) writes the same bytes as
 * one shard, whose counts add up to the words written. */
static void
check_shardings(const char *dir, const char *name, size_t len,
		uint32_t seed, const size_t *sizes, size_t n)
{
	char in[64], path[300], one[320], out[320];
	uint64_t want, words;
	size_t i, lines, n1, n2;
	char *ref, *got;

	snprintf(in, sizeof(in), "%s/%s", dir, name);
	ft_mkdirs(in);
	snprintf(path, sizeof(path), "%s/a", in);
	want = write_text(path, len, seed);
	snprintf(path, sizeof(path), "%s/b", in);
	want += write_text(path, 3001, seed + 1);
	snprintf(one, sizeof(one), "%s/%s.one", dir, name);
	run_sharded(dir, in, one, len + 3001, 0);
	output_totals(one, &words, &lines);
	assert_int_equal(words, want);
	ref = slurp(one, &n1);
	for (i = 0; i < n; i++) {
		snprintf(out, sizeof(out), "%s/%s.out%zu", dir, name, i);
		run_sharded(dir, in, out, sizes[i], (int)i + 1);
		got = slurp(out, &n2);
		assert_int_equal(n2, n1);
		assert_memory_equal(got, ref, n1);
		free(got);
	}
	free(ref);
}

/* The records of the partition files map-SHARD.* of job dir DIR (PARTS
 * of them): their number, and whether each count is at least 1. */
static size_t
shard_records(const char *dir, size_t shard, size_t parts, int *zero)
{
	char path[400], err[256];
	const uint8_t *w;
	uint8_t *data;
	uint64_t count;
	size_t p, len, n, total = 0;
	struct wc_in in;

	for (p = 0; p < parts; p++) {
		snprintf(path, sizeof(path), "%s/map-%zu.%zu", dir, shard, p);
		data = wc_read_all(path, WC_PAD, &len, err, sizeof(err));
		assert_non_null(data);
		assert_int_equal(wc_in_open(&in, data, len), 0);
		while (wc_in_next(&in, &w, &n, &count) == 1) {
			total++;
			*zero |= count == 0;
		}
		free(data);
	}
	return total;
}

/* Run map task SPEC of job dir DIR, shard SHARD of a job of 2 reducers:
 * it must report WANT distinct words and write exactly as many records,
 * none with a count of 0. */
static void
run_map(const json_t *spec, const char *dir, size_t shard, size_t want)
{
	volatile int cancel = 0;
	struct ft_task task = { .id = shard, .attempt = 1, .spec = spec,
				.cancel = &cancel, .output_cap = 65536 };
	struct ft_result r;
	json_t *o;
	int zero = 0;

	memset(&r, 0, sizeof(r));
	plugin->run(&task, &r);
	assert_int_equal(r.ok, 1);
	o = json_loadb(r.out, r.out_len, 0, NULL);
	assert_non_null(o);
	assert_int_equal(json_integer_value(json_object_get(o, "distinct")),
			 want);
	json_decref(o);
	assert_int_equal(shard_records(dir, shard, 2, &zero), want);
	assert_false(zero);
	free(r.out);
	free(r.err);
}

/* A worker keeps a map's table for the job's next map: the next shard's
 * partitions and report still hold its own words only, and after a map of
 * another job too. */
static void
test_map_keeps_table(void **state)
{
	/* Shards of 5 bytes: "aa bb" | "cc" "dd " | "ee ff": each word in
	 * one shard, two in each. */
	static const char *const texts[] = { "aa bb", "cc", "dd ee ff" };
	char dir[] = "/tmp/ftfarm-wc-unit-XXXXXX", text[1024];
	char jd[2][320];
	json_t *jobj, *maps[2];
	const struct ft_plugin *one[1];
	struct ft_plugins pl = { .v = one, .n = 1 };
	struct job *j[2];
	char err[512];
	size_t k;

	(void)state;
	load_plugin();
	one[0] = plugin;
	assert_non_null(mkdtemp(dir));
	write_texts(dir, texts, 3);
	snprintf(text, sizeof(text), "{\"type\": \"wordcount\", "
		 "\"inputs\": [\"%s/in\"], \"output\": \"%s/out\", "
		 "\"shard_bytes\": 5, \"reducers\": 2}", dir, dir);
	jobj = json_loads(text, 0, NULL);
	for (k = 0; k < 2; k++) {
		snprintf(jd[k], sizeof(jd[k]), "%s/job%zu", dir, k);
		ft_mkdirs(jd[k]);
		maps[k] = NULL;
		j[k] = job_start(plugin, &pl, jobj, jd[k], &maps[k], err,
				 sizeof(err));
		assert_non_null(j[k]);
		assert_int_equal(json_array_size(maps[k]), 3);
	}
	run_map(json_array_get(maps[0], 0), jd[0], 0, 2);
	run_map(json_array_get(maps[0], 1), jd[0], 1, 2);	/* kept */
	run_map(json_array_get(maps[1], 0), jd[1], 0, 2);	/* not */
	run_map(json_array_get(maps[1], 1), jd[1], 1, 2);	/* kept */
	run_map(json_array_get(maps[0], 2), jd[0], 2, 2);	/* not */
	run_map(json_array_get(maps[1], 2), jd[1], 2, 2);	/* not */
	run_map(json_array_get(maps[1], 0), jd[1], 0, 2);	/* kept */
	for (k = 0; k < 2; k++) {
		job_free(j[k]);
		json_decref(maps[k]);
	}
	json_decref(jobj);
	snprintf(text, sizeof(text), "rm -rf '%s'", dir);
	assert_int_equal(system(text), 0);
}

/* Shard borders anywhere in longer texts (many 64-byte blocks, scan
 * batches and read buffers, words across each) count every word once. */
static void
test_jobs_long_text_shards(void **state)
{
	static const size_t small[] = { 17, 63, 64, 65, 127, 128, 129 };
	static const size_t big[] = { 1000, 1023, 1024, 1025, 4097, 65537,
				      262143, 262144, 262145, 400000 };
	char dir[] = "/tmp/ftfarm-wc-unit-XXXXXX", cmd[64];

	(void)state;
	assert_non_null(mkdtemp(dir));
	check_shardings(dir, "small", 5003, 7, small,
			sizeof(small) / sizeof(small[0]));
	/* Past two read buffers. */
	check_shardings(dir, "big", 700000, 11, big,
			sizeof(big) / sizeof(big[0]));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_masks_agree),
		cmocka_unit_test(test_separator_hex),
		cmocka_unit_test(test_hash_paths_agree),
		cmocka_unit_test(test_table_counts),
		cmocka_unit_test(test_table_sort),
		cmocka_unit_test(test_table_sort_counts),
		cmocka_unit_test(test_record_files),
		cmocka_unit_test(test_record_lengths),
		cmocka_unit_test(test_path_escape),
		cmocka_unit_test(test_plan_shards),
		cmocka_unit_test(test_jobs_every_shard_size),
		cmocka_unit_test(test_jobs_long_text_shards),
		cmocka_unit_test(test_map_keeps_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
