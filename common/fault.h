/* SPDX-License-Identifier: Apache-2.0 */
/* fault.h - allocation-failure injection for torture tests. With
 * FAULT_ALLOC_AT=N in the environment, the N-th call of fault_alloc_fails()
 * after fault_arm() returns true. Compiled in always; costs one branch. */
#ifndef PODRES_FAULT_H
#define PODRES_FAULT_H
#include <stdbool.h>

/* Reads FAULT_ALLOC_AT once; called by main() of each daemon. */
void fault_init(void);
/* True when this allocation should be made to fail. Thread-safe. */
bool fault_alloc_fails(void);

#endif
