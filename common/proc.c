/* SPDX-License-Identifier: Apache-2.0 */
/* proc.c - SIGTERM, SIGINT and SIGPIPE for the daemons (proc.h). */
#define LOG_MOD "main"
#include "common.h"

#include <pthread.h>
#include <time.h>

#include "proc.h"

void proc_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

bool proc_wait(const sigset_t *sigs, unsigned ms)
{
    struct timespec tick = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    int sig = sigtimedwait(sigs, NULL, &tick);

    if (sig != SIGTERM && sig != SIGINT)
        return false;
    log_info("received %s; shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    return true;
}
