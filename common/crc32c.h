/*
 * crc32c: the Castagnoli CRC (iSCSI, ext4's metadata), which guards the
 * records ftfarm reads back after a crash: result lines and the lease.
 * The SSE 4.2 instruction where the CPU has it, tables elsewhere.
 */
#ifndef FT_CRC32C_H
#define FT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC of LEN bytes at P, continuing from CRC (0 to start). */
uint32_t crc32c(uint32_t crc, const void *p, size_t len);

#endif
