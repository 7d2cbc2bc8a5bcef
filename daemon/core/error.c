/*
 * error.c - implementation of error.h.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

void err_set(struct err_info *e, enum err_status status, const char *field, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}
