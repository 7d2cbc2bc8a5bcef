/*
 * error.h - the structured error of every request path: a status the API
 * maps to a gRPC code (api_pb.c, in one place), the request field at fault
 * (a JobSpec or fabric field name, "" when none) and a message for people.
 * It belongs to no module: the job manager, the rails, adoption and the API
 * fill and read it alike. A leaf: it calls nothing of the daemon.
 */
#ifndef OCSD_ERROR_H
#define OCSD_ERROR_H

enum err_status {
	ERR_OK = 0,
	ERR_INVALID, /* the request names a bad field */
	ERR_NOT_FOUND,
	ERR_EXISTS,	  /* same id, different request */
	ERR_EXHAUSTED,	  /* no capacity: says what is missing */
	ERR_PRECONDITION, /* e.g. releasing a job that is being programmed */
	ERR_UNAVAILABLE,  /* devices unreachable or store failing: nothing changed */
	ERR_INTERNAL,
	/* ocsd stopped before the job settled: it is stored and carried out
	 * at the next start (GetJob tells the outcome then) */
	ERR_ABORTED,
	ERR_CANCELLED, /* the caller went away before the answer (nothing stored) */
};

struct err_info {
	enum err_status status;
	char field[128];
	char message[512];
};

/* Fills *e: the status, the field (NULL for none) and the message. */
__attribute__((format(printf, 4, 5))) void err_set(struct err_info *e, enum err_status status,
						   const char *field, const char *fmt, ...);

/* Appends to the message (cut at its size). */
__attribute__((format(printf, 2, 3))) void err_append(struct err_info *e, const char *fmt, ...);

#endif
