/* SPDX-License-Identifier: Apache-2.0 */
/* fault.h - allocation-failure injection for torture tests. With
 * FAULT_ALLOC_AT=N in the environment, the N-th call of fault_alloc_fails()
 * returns true (once). The count starts at fault_init(), or, when
 * FAULT_ALLOC_AFTER_START=1 is set too, at fault_arm(), which each daemon
 * calls once start-up is over: N then counts the allocations of requests
 * only. Compiled in always; costs one branch. */
#ifndef PODRES_FAULT_H
#define PODRES_FAULT_H
#include <stdbool.h>

/* Reads FAULT_ALLOC_AT and FAULT_ALLOC_AFTER_START once; called first by
 * main() of each daemon. */
void fault_init(void);
/* Start counting now when FAULT_ALLOC_AFTER_START=1 (else a no-op). Called by
 * main() once the daemon serves. */
void fault_arm(void);
/* True when this allocation should be made to fail. Thread-safe. */
bool fault_alloc_fails(void);

#endif
