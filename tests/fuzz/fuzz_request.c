/*
 * libFuzzer harness: one control request line, as the master parses it
 * (JSON, the protocol version, the command table's fields).  Whatever the
 * bytes, parsing must neither crash nor leak.
 */
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	json_t *req = NULL;

	ctl_parse_request((const char *)data, size, &req, err, sizeof(err));
	json_decref(req);
	return 0;
}
