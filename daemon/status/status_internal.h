/*
 * status_internal.h - what the renderers of daemon/status/ share, so that
 * the JSON and the SVG treat a name's bytes alike.
 */
#ifndef OCSD_STATUS_INTERNAL_H
#define OCSD_STATUS_INTERNAL_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1..4; 1 for ASCII), 0 when
 * the bytes at s are not one (s NUL-terminated). */
size_t sp_utf8_len(const unsigned char *s);

#endif
