/*
 * bmc: the nodes' BMCs, driven with ipmitool as a watched child (child.h).
 *
 *   ipmitool -I lanplus -C 3 -N 1 -R 1 -H HOST -p PORT -U USER -f FILE
 *            chassis power status|cycle|on
 *
 * ipmitool reads the password from the file itself (-f): it is never on
 * a command line, in an environment, a log or an event.  Its own -N/-R
 * bound each try; the bmc's deadline_s kills it if it still runs.  Each
 * BMC has at most one command in flight, and at least min_gap_s between
 * the end of one command and the start of the next (BMCs crash under
 * bursts): a command sent sooner waits on a timer.  Every run is logged
 * with its exit status and output, and written as a bmc_command event.
 */
#ifndef FT_BMC_H
#define FT_BMC_H

#include "master.h"

enum bmc_cmd { BMC_STATUS = 1, BMC_CYCLE, BMC_ON };

struct bmc_result {
	int ok;				/* ipmitool exited 0 */
	int ran;			/* ipmitool could be started */
	int power;			/* BMC_STATUS: 1 on, 0 off, -1 unknown */
	double seconds;
	char error[256];		/* why it failed */
};

/* NODE's command CMD has ended with R. */
typedef void (*bmc_done_fn)(struct master *m, int node, enum bmc_cmd cmd,
			    const struct bmc_result *r);

void bmc_init(struct master *m);
/* Nodes joined: a BMC slot for each node of the config from now on. */
void bmc_grow(struct master *m);
/* Kill what runs, forget what waits. */
void bmc_free(struct master *m);
/* Send CMD to the BMC of node NODE (which has one): now, or once its gap
 * has passed; DONE from the loop when it has ended.  0, or -1 when a
 * command of that BMC is already waiting or in flight. */
int bmc_send(struct master *m, int node, enum bmc_cmd cmd, bmc_done_fn done);
/* Is a command of NODE's BMC waiting or in flight? */
int bmc_busy(int node);
/* Forget NODE's command: kill it if it runs; its DONE is not called. */
void bmc_cancel(int node);
/* "chassis power cycle"... */
const char *bmc_cmd_name(enum bmc_cmd cmd);

#endif
