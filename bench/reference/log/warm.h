/*
 * warm.h - the memory warm-up shared by `warm` and `logbench`.
 *
 * On these VMs (Firecracker with virtio-balloon free-page reporting) guest memory that stayed
 * free for a couple of seconds is handed back to the host, and the next first touch of it is
 * several times slower. Buffered-file and page-cache figures then measure the host, not the
 * program. Faulting in and releasing a large anonymous region just before a timed run puts
 * host-backed pages on the guest's free lists, where the page cache picks them up again.
 */
#ifndef LIONET_REFERENCE_WARM_H
#define LIONET_REFERENCE_WARM_H

#include <stddef.h>
#include <sys/mman.h>

#define WARM_BYTES ((size_t)1280 << 20) /* 1.25 GiB */

/* Returns 0 on success, -1 if the region could not be mapped. */
static inline int warm_memory(size_t bytes)
{
    char *area = (char *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED)
        return -1;
    madvise(area, bytes, MADV_HUGEPAGE); /* fewer faults; the kernel still zeroes every byte */
    for (size_t off = 0; off < bytes; off += 4096)
        ((volatile char *)area)[off] = 1;
    munmap(area, bytes);
    return 0;
}

#endif
