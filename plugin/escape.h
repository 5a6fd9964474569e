/* SPDX-License-Identifier: Apache-2.0 */
/* escape.h - text from the API made safe for a terminal, as kubectl's
 * printers make it (k8s.io/cli-runtime's EscapeTerminal) and further: a
 * device id, alias or node name that carries ESC, another control
 * character, a C1 control, a bidirectional override or bytes that are not
 * UTF-8 must not retitle, clear or rewrite the operator's screen, nor
 * break a table's rows. Pure; thread-safe. */
#ifndef PODRES_PLUGIN_ESCAPE_H
#define PODRES_PLUGIN_ESCAPE_H
#include <stdbool.h>

#include "../common/err.h"
#include "../common/strbuf.h"

/* Append 's' to 'sb' with ESC as "^[", every other C0 control and DEL in
 * caret notation ("^G", "^J", "^?"), C1 controls and the bidirectional
 * controls U+202A..U+202E, U+2066..U+2069 as "\uXXXX", and each byte of an
 * invalid UTF-8 sequence as "\xNN". Everything else as it is. */
err_t escape_terminal(struct strbuf *sb, const char *s) WARN_UNUSED;

/* Whether escape_terminal would change 's'. */
bool escape_needed(const char *s);

#endif
