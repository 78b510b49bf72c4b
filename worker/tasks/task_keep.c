/* task_keep: what a plugin keeps between tasks (see task_keep.h). */
#include "task_keep.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include "util.h"

static void *
keeper_main(void *arg)
{
	struct task_keep *k = arg;
	struct timespec ts;

	pthread_mutex_lock(k->mu);
	for (;;) {
		if (k->until <= 0) {
			pthread_cond_wait(&k->cv, k->mu);
		} else if (ft_now() >= k->until) {
			k->forget();
			k->until = 0;
		} else {	/* ft_now is CLOCK_MONOTONIC, as k->cv */
			ts.tv_sec = (time_t)k->until;
			ts.tv_nsec = (long)((k->until - (double)ts.tv_sec) *
					    1e9);
			pthread_cond_timedwait(&k->cv, k->mu, &ts);
		}
	}
	return NULL;
}

/* Pin the plugin that holds K and start the thread.  0, or -1 without a
 * thread. */
static int
keeper_start(struct task_keep *k)
{
	const char *env = getenv(k->env);
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	Dl_info self;
	int rc;

	if (dladdr(k, &self) == 0 ||
	    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD |
		   RTLD_NODELETE) == NULL)
		return -1;
	k->idle_s = env && atof(env) > 0 ? atof(env) : k->default_s;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &ta, keeper_main, k);
	pthread_attr_destroy(&ta);
	return rc == 0 ? 0 : -1;
}

void
task_keep_idle(struct task_keep *k, int holding)
{
	if (!k->started) {
		k->started = keeper_start(k) == 0 ? 1 : -1;
	}
	if (k->started < 0)
		return;
	k->until = holding ? ft_now() + k->idle_s : 0;
	pthread_cond_signal(&k->cv);
}
