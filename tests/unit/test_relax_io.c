/*
 * Unit tests of the relax plugin's checkpoint files written through a
 * mapping: a new file is not mapped (it is written), a file taken over is
 * mapped and what is stored into the mapping is the published file's
 * bytes, the mapping of the very file taken over is reused (and only of
 * that file), and a kept mapping stops naming its file once the file is
 * taken over.
 *
 * The plugin's source is compiled in (the plugin is a shared object).
 */
#include <fcntl.h>
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

#include "tasks/relax_io.c"

#define ROWS 300			/* a size that is not whole pages */
#define ROW 13
#define SIZE ((size_t)ROWS * ROW * sizeof(double))

static char dir[] = "/tmp/ftfarm-test-relax-io-XXXXXX";

static char *
in_dir(const char *name)
{
	return ft_asprintf("%s/%s", dir, name);
}

/* SIZE bytes of doubles from SEED. */
static double *
pattern(double seed)
{
	double *p = malloc(SIZE);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < SIZE / sizeof(double); i++)
		p[i] = seed + (double)i * 0.5;
	return p;
}

static void
assert_file_is(const char *name, const double *want)
{
	char *path = in_dir(name);
	double *got = malloc(SIZE + 1);
	int fd = open(path, O_RDONLY);
	ssize_t r;

	assert_true(fd >= 0);
	r = read(fd, got, SIZE + 1);
	assert_int_equal(r, (ssize_t)SIZE);
	assert_memory_equal(got, want, SIZE);
	close(fd);
	free(got);
	free(path);
}

/* Write a new checkpoint NAME holding WANT (not mapped: written). */
static void
write_new(const char *name, const double *want)
{
	struct relax_file f = { .fd = -1 };
	struct relax_map m;
	char err[256], *path = in_dir(name);

	assert_int_equal(relax_file_open(&f, path, NULL, (off_t)SIZE, err,
					 sizeof(err)), 0);
	assert_int_equal(relax_file_map(&f, SIZE, &m, NULL), -1);
	assert_null(m.rows);
	assert_int_equal(relax_file_write(&f, want, SIZE, 0, err,
					  sizeof(err)), 0);
	assert_int_equal(relax_file_commit(&f, err, sizeof(err)), 0);
	assert_file_is(name, want);
	free(path);
}

/* Take OLD over as checkpoint NAME, mapped into M (from CACHE if it is
 * OLD's mapping), store WANT through the mapping, publish. */
static void
take_over_mapped(const char *old, const char *name, const double *want,
		 struct relax_map *m, struct relax_map *cache)
{
	struct relax_file f = { .fd = -1 };
	char err[256], *path = in_dir(name), *reuse = in_dir(old);

	assert_int_equal(relax_file_open(&f, path, reuse, (off_t)SIZE, err,
					 sizeof(err)), 0);
	assert_int_equal(relax_file_map(&f, SIZE, m, cache), 0);
	assert_non_null(m->rows);
	assert_int_equal(m->len, SIZE);
	memcpy(m->rows, want, SIZE);
	assert_int_equal(relax_file_commit(&f, err, sizeof(err)), 0);
	assert_file_is(name, want);
	assert_true(relax_map_is(m, path));
	assert_false(relax_map_is(m, reuse));	/* gone: taken over */
	free(path);
	free(reuse);
}

static void
test_new_file_is_written_not_mapped(void **state)
{
	double *a = pattern(1.0);

	(void)state;
	write_new("cp-1-0", a);
	free(a);
}

static void
test_taken_over_file_is_mapped_and_reused(void **state)
{
	double *a = pattern(1.0), *b = pattern(2.0), *c = pattern(3.0);
	double *d = pattern(4.0);
	struct relax_map m1, m2, m3;
	char *p20 = in_dir("cp-20-0");
	double *rows;

	(void)state;
	write_new("cp-10-0", a);
	write_new("cp-20-0", b);
	/* Round 30 takes cp-10 over: a fresh mapping (nothing cached). */
	take_over_mapped("cp-10-0", "cp-30-0", c, &m1, NULL);
	/* A mapping of another file (cp-30) is not used for cp-20. */
	take_over_mapped("cp-20-0", "cp-40-0", d, &m2, &m1);
	assert_non_null(m1.rows);
	assert_ptr_not_equal(m2.rows, m1.rows);
	assert_false(relax_map_is(&m2, p20));
	/* Round 50 takes cp-30 over: the mapping of cp-30 is moved over. */
	rows = m1.rows;
	take_over_mapped("cp-30-0", "cp-50-0", a, &m3, &m1);
	assert_ptr_equal(m3.rows, rows);
	assert_null(m1.rows);
	/* cp-40 stays as published, whatever else was stored. */
	assert_file_is("cp-40-0", d);
	relax_map_drop(&m1);
	relax_map_drop(&m2);
	relax_map_drop(&m3);
	assert_null(m3.rows);
	free(p20);
	free(a);
	free(b);
	free(c);
	free(d);
}

static void
test_kept_mapping_names_only_its_file(void **state)
{
	double *a = pattern(5.0), *b = pattern(6.0);
	struct relax_map m;
	char *p60 = in_dir("cp-60-0"), *p70 = in_dir("cp-70-0");

	(void)state;
	write_new("cp-55-0", a);
	take_over_mapped("cp-55-0", "cp-60-0", b, &m, NULL);
	/* Another file of the same size under the name: not the mapping's. */
	assert_int_equal(rename(p60, p70), 0);
	write_new("cp-60-0", b);
	assert_false(relax_map_is(&m, p60));
	relax_map_drop(&m);
	assert_false(relax_map_is(&m, p70));
	free(p60);
	free(p70);
	free(a);
	free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_file_is_written_not_mapped),
		cmocka_unit_test(test_taken_over_file_is_mapped_and_reused),
		cmocka_unit_test(test_kept_mapping_names_only_its_file),
	};
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	(void)relax_remove_dir(dir);
	return rc;
}
