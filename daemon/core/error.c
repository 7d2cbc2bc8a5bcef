/*
 * error.c - implementation of error.h.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void err_set(struct err_info *e, enum err_status status, const char *field, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

void err_append(struct err_info *e, const char *fmt, ...)
{
	size_t at = strlen(e->message);
	va_list ap;

	if (at >= sizeof(e->message) - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(e->message + at, sizeof(e->message) - at, fmt, ap);
	va_end(ap);
}
