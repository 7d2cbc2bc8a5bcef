/*
 * nb_internal.h - facts about the served methods (path, message types,
 * least role) shared by the files of the northbound library and by ocsctl,
 * which calls the same methods. Not meant for the daemon: nb.h is its API.
 * Pure data and helpers; thread-safe.
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

/*
 * nb_accept.c: guards the listening TCP sockets bound to port (gRPC's, once
 * grpc_server_add_http2_port has bound them) against descriptor exhaustion
 * and caps the descriptors their connections take (see nb_accept.c).
 * Writes at most max_fds guarded descriptors to fds; returns how many, or
 * -errno. nb_accept_unguard() forgets them (before they are closed).
 * Thread-safe.
 */
int nb_accept_guard(int port, int *fds, int max_fds);
void nb_accept_unguard(const int *fds, int n_fds);

#endif
