"""memhog BYTES [HOLD_S]: take BYTES of memory and touch every page of
it, then hold it HOLD_S seconds.  The mapping asks for transparent huge
pages, so that gigabytes are faulted in within a second (a 4 KiB page
costs some 25 us on this VM); where the kernel gives none it still
works, only slower."""
import mmap
import sys
import time

size = int(sys.argv[1])
hold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
# Private: a shared anonymous mapping is shmem, which gets no huge pages.
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
try:
    m.madvise(mmap.MADV_HUGEPAGE)
except (AttributeError, OSError):
    pass
for off in range(0, size, 4096):
    m[off] = 1
print(f"took {size} bytes", flush=True)
time.sleep(hold)
