/*
 * warm - run right before a buffered-file or storage benchmark (see warm.h for why).
 *
 * What it stands for: nothing is measured; it makes page-cache figures on these VMs reflect the
 * program under test instead of the host's memory balloon. Touches 1.25 GiB of anonymous
 * memory, page by page, and frees it again.
 *
 * Usage: warm   (no arguments; exit status 1 if the memory could not be mapped)
 */
#include "warm.h"

int main(void)
{
    return warm_memory(WARM_BYTES) == 0 ? 0 : 1;
}
