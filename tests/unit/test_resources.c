/* Unit tests of what tasks' resources are written as: common/memsize.c
 * (amounts of memory), common/outpath.c (output file patterns) and
 * common/cgroup.c (where a memory cgroup is, from the kernel's texts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cgroup.h"
#include "memsize.h"
#include "outpath.h"

static uint64_t
parsed(const char *s)
{
	uint64_t v = 0;

	if (memsize_parse(s, &v) != 0)
		fail_msg("\"%s\" refused", s);
	return v;
}

static void
test_memsize_parse(void **st)
{
	const char *bad[] = { "", "G", "-1G", "0", "0M", "1.5", "2X", "2GG",
			      "1e3", " 2G", "2G ", "nan", "inf", "2Gi", "2PiB",
			      "2000T", NULL };
	uint64_t v;
	int i;

	(void)st;
	assert_true(parsed("1") == 1);
	assert_true(parsed("4096") == 4096);
	assert_true(parsed("2K") == 2048);
	assert_true(parsed("100M") == 100ULL << 20);
	assert_true(parsed("100m") == 100ULL << 20);
	assert_true(parsed("2G") == 2ULL << 30);
	assert_true(parsed("2GiB") == 2ULL << 30);
	assert_true(parsed("2gb") == 2ULL << 30);
	assert_true(parsed("1.5G") == 3ULL << 29);
	assert_true(parsed("1T") == 1ULL << 40);
	assert_true(parsed("1024T") == MEMSIZE_MAX);
	/* A fraction of a byte after the multiple is rounded up. */
	assert_true(parsed("0.001K") == 2);
	for (i = 0; bad[i]; i++)
		if (memsize_parse(bad[i], &v) == 0)
			fail_msg("\"%s\" taken as %llu", bad[i],
				 (unsigned long long)v);
}

static void
test_memsize_json(void **st)
{
	json_t *v;
	uint64_t b;

	(void)st;
	v = json_integer(12345);
	assert_int_equal(memsize_json(v, &b), 0);
	assert_true(b == 12345);
	json_decref(v);
	v = json_integer(0);
	assert_int_equal(memsize_json(v, &b), -1);
	json_decref(v);
	v = json_string("64G");
	assert_int_equal(memsize_json(v, &b), 0);
	assert_true(b == 64ULL << 30);
	json_decref(v);
	v = json_real(2.5);
	assert_int_equal(memsize_json(v, &b), -1);
	json_decref(v);
	assert_int_equal(memsize_json(NULL, &b), -1);
	assert_int_equal(memsize_mib(1), 1);
	assert_int_equal(memsize_mib(1 << 20), 1);
	assert_int_equal(memsize_mib((1 << 20) + 1), 2);
}

static void
test_memsize_format(void **st)
{
	char b[32];

	(void)st;
	assert_string_equal(memsize_format(300, b, sizeof(b)), "300 B");
	assert_string_equal(memsize_format(4096, b, sizeof(b)), "4 KiB");
	assert_string_equal(memsize_format(100ULL << 20, b, sizeof(b)),
			    "100 MiB");
	assert_string_equal(memsize_format(3ULL << 29, b, sizeof(b)),
			    "1.5 GiB");
	assert_string_equal(memsize_format(1000ULL << 20, b, sizeof(b)),
			    "1000 MiB");
}

static void
test_outpath_check(void **st)
{
	const char *good[] = { "out", "/o/%b/%t.%a.%n.out", "100%%", NULL };
	const char *bad[] = { "", "x%", "%x", "%B", "a%%%", NULL };
	char why[200];
	int i;

	(void)st;
	for (i = 0; good[i]; i++)
		if (outpath_check(good[i], why, sizeof(why)) != 0)
			fail_msg("\"%s\" refused: %s", good[i], why);
	for (i = 0; bad[i]; i++)
		if (outpath_check(bad[i], why, sizeof(why)) == 0)
			fail_msg("\"%s\" taken", bad[i]);
	outpath_check("a/%q.out", why, sizeof(why));
	assert_non_null(strstr(why, "\"%q\" is no placeholder"));
}

static void
test_outpath_expand(void **st)
{
	char out[OUTPATH_MAX], big[OUTPATH_MAX];

	(void)st;
	assert_int_equal(outpath_expand("/o/%b/%t.%a.%n.out", 12, 3, 2,
					"node1x", 5, out), 0);
	assert_string_equal(out, "/o/12/3.2.node1.out");
	assert_int_equal(outpath_expand("r%%%t", 1, 0, 1, "", 0, out), 0);
	assert_string_equal(out, "r%0");
	/* Without %a, each attempt after the first has its own file. */
	assert_int_equal(outpath_expand("/o/%t.out", 1, 7, 1, "", 0, out), 0);
	assert_string_equal(out, "/o/7.out");
	assert_int_equal(outpath_expand("/o/%t.out", 1, 7, 3, "", 0, out), 0);
	assert_string_equal(out, "/o/7.out.3");
	memset(big, 'x', sizeof(big) - 10);
	big[sizeof(big) - 10] = '\0';
	strcat(big, "%t%t%t");
	assert_int_equal(outpath_expand(big, 1, 4000000000u, 1, "", 0, out),
			 -1);
	assert_string_equal(out, "");
}

/* Fragments of /proc/self/mountinfo. */
#define MI_V1 \
	"35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" \
	"38 25 0:33 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup " \
	"rw,memory\n"
#define MI_V2 \
	"31 25 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
#define MI_HYBRID MI_V1 \
	"44 25 0:39 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"

static void
test_cg_locate(void **st)
{
	struct cg_where w;

	(void)st;
	/* Hybrid: the memory controller's v1 hierarchy wins. */
	assert_int_equal(cg_locate("4:memory:/jobs/j1\n0::/user.slice\n",
				   MI_HYBRID, 0, &w), 0);
	assert_int_equal(w.v, CG_V1);
	assert_string_equal(w.dir, "/sys/fs/cgroup/memory/jobs/j1");
	assert_string_equal(w.mount, "/sys/fs/cgroup/memory");
	/* Controllers listed together in one v1 hierarchy. */
	assert_int_equal(cg_locate("3:cpu,memory:/\n", "40 25 0:33 / "
				   "/cg/mem rw - cgroup cgroup rw,cpu,memory\n",
				   0, &w), 0);
	assert_int_equal(w.v, CG_V1);
	assert_string_equal(w.dir, "/cg/mem");
	/* Unified, memory on it. */
	assert_int_equal(cg_locate("0::/user.slice/app.scope\n", MI_V2, 1,
				   &w), 0);
	assert_int_equal(w.v, CG_V2);
	assert_string_equal(w.dir, "/sys/fs/cgroup/user.slice/app.scope");
	/* Unified without the memory controller: none. */
	assert_int_equal(cg_locate("0::/x\n", MI_V2, 0, &w), -1);
	assert_int_equal(w.v, CG_NONE);
	/* A container's view: the mount's root is the cgroup itself. */
	assert_int_equal(cg_locate("0::/kubepods/pod1\n",
				   "31 25 0:27 /kubepods/pod1 /sys/fs/cgroup rw "
				   "- cgroup2 cgroup2 rw\n", 1, &w), 0);
	assert_string_equal(w.dir, "/sys/fs/cgroup");
	/* A blank in the mount point, as mountinfo escapes it. */
	assert_int_equal(cg_locate("0::/a\n", "31 25 0:27 / /sys/fs/my\\040cg "
				   "rw - cgroup2 cgroup2 rw\n", 1, &w), 0);
	assert_string_equal(w.dir, "/sys/fs/my cg/a");
	/* Nothing mounted. */
	assert_int_equal(cg_locate("4:memory:/a\n", "", 1, &w), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memsize_parse),
		cmocka_unit_test(test_memsize_json),
		cmocka_unit_test(test_memsize_format),
		cmocka_unit_test(test_outpath_check),
		cmocka_unit_test(test_outpath_expand),
		cmocka_unit_test(test_cg_locate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
