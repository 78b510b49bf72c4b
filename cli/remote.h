/*
 * remote: the CLI's way to a master on another host, over TCP.
 *
 * When the control socket cannot be connected to (the state dir is on a
 * shared file system and the master runs elsewhere), the CLI reads the
 * address the master published in <state_dir>/control.tcp, connects and
 * proves who it is with a MUNGE credential bound to the master's nonce
 * (common/rauth.h).  Then every command works as over the socket.
 */
#ifndef FT_CLI_REMOTE_H
#define FT_CLI_REMOTE_H

#include "config.h"

/* Let ctl_connect fall back to TCP for CFG's master (munged at CFG's
 * control.munge_socket, or libmunge's default). */
void cli_remote_init(const struct ft_config *cfg);

#endif
