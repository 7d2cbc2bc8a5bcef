/*
 * nb_internal.h - facts about the served methods shared by the files of
 * the northbound library (not installed for callers).
 */
#ifndef OCS_NB_INTERNAL_H
#define OCS_NB_INTERNAL_H

#include <stdbool.h>

#include "nb.h"

struct nb_method_info {
	const char *path; /* "/ocs.v1.Jobs/SubmitJob" */
	const ProtobufCMessageDescriptor *request;
	const ProtobufCMessageDescriptor *response;
	enum nb_role min_role;
	bool server_streaming;
	bool library_served; /* Events and Health: no daemon handler */
};

const struct nb_method_info *nb_method_info(enum nb_method m);
/* Fills err (code, field, printf-style message); returns -EINVAL. */
int nb_error_set(struct nb_error *err, enum nb_code code, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
