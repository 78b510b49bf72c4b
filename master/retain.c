/* retain: ended batches forgotten after retain_s, or by ftfarm forget
 * (see batches.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "batch_int.h"
#include "ctl.h"
#include "log.h"
#include "store.h"
#include "util.h"

/* The directory of batch ID. */
static char *
dir_of(const struct batches *bs, long id)
{
	return ft_asprintf("%s/batches/%ld", bs->cfg->state_dir, id);
}

int
batches_forgotten(const struct batches *bs, long id)
{
	char *dir;
	struct stat st;
	int gone;

	if (id <= 0 || id >= bs->next || batches_find(bs, id))
		return 0;
	dir = dir_of(bs, id);
	gone = lstat(dir, &st) == -1 && errno == ENOENT;
	free(dir);
	return gone;
}

/* Forget the ended batch ID (AT: when it ended, 0 unknown): out of
 * memory, its directory renamed at once and removed off the loop
 * (ops.forget).  0, or -1 when it has no directory (forgotten already). */
static int
forget(struct batches *bs, long id, double at)
{
	struct batch *b = batches_find(bs, id);
	char *dir = dir_of(bs, id);
	char *gone = ft_asprintf("%s/batches/forgotten.%ld",
				 bs->cfg->state_dir, id);

	if (store_check_lease(bs->store, 1) == -1 || rename(dir, gone) == -1) {
		if (errno != ENOENT)
			log_warn("%s", dir);
		free(dir);
		free(gone);
		return -1;
	}
	free(dir);
	if (b) {
		bs->v[id - bs->first] = NULL;
		batch_free(b);
		bs->nfinished--;
		batches_trim_front(bs);
	}
	bs->forgotten++;
	ev_batch_forgotten(bs->ev, id, at > 0 ? ft_wall() - at : -1);
	/* Only the newest batch's directory holds the highest id given:
	 * batches/last_id must say it before that one goes. */
	bs->ops.forget(bs->ops.ctx, id, gone, id == bs->next - 1 ? id : 0);
	return 0;
}

int
batches_retain(struct batches *bs, double now)
{
	int count = 0;

	while (bs->ends_head < bs->nends &&
	       bs->ends[bs->ends_head].at + bs->cfg->retain <= now) {
		struct batch_ended e = bs->ends[bs->ends_head++];

		count += forget(bs, e.id, e.at) == 0;
	}
	if (count)
		log_info("%d batches ended %.0f s ago or more forgotten "
			 "(retain_s)", count, bs->cfg->retain);
	return count;
}

int
batches_forget(struct batches *bs, long id, char *err, size_t n)
{
	struct batch *b = batches_find(bs, id);
	int finished = 0;
	json_t *row;

	if (b && b->state != B_FINISHED) {
		snprintf(err, n, "batch %ld has not ended (it is %s): cancel it "
			 "first", id, batch_state_name(b->state));
		return -1;
	}
	if (batches_forgotten(bs, id)) {
		snprintf(err, n, "batch %ld was forgotten already", id);
		return -1;
	}
	row = b ? NULL : batches_lookup(bs, id, &finished);
	json_decref(row);
	if (b == NULL && !finished) {
		snprintf(err, n, row ? "batch %ld has not ended: it is being "
			 "replayed" : "no batch %ld", id);
		return -1;
	}
	if (forget(bs, id, 0) == -1) {
		snprintf(err, n, "batch %ld: cannot forget it: %s", id,
			 strerror(errno));
		return -1;
	}
	return 0;
}

