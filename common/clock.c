/* SPDX-License-Identifier: Apache-2.0 */
/* clock.c - monotonic and wall clocks (clock.h). */
#include "common.h"

#include "clock.h"

static uint64_t read_us(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t clock_mono_ms(void)
{
    return read_us(CLOCK_MONOTONIC) / 1000u;
}

uint64_t clock_mono_us(void)
{
    return read_us(CLOCK_MONOTONIC);
}

uint64_t clock_wall_ms(void)
{
    return read_us(CLOCK_REALTIME) / 1000u;
}

struct timespec clock_mono_after(uint64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000u);
    ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}
