/*
 * devsim_auth.h - how ocs-devsim lets clients in: SSH password
 * authentication against one user and the server's host key (given, or
 * generated into a private temporary file), or TLS with a server
 * certificate and one CA whose client certificates all map to that user.
 *
 * libnetconf2's server keeps its callbacks process-global, so one struct
 * devsim_auth serves the whole process; devsim_auth_register() hands it to
 * the callbacks, which only read it. Not thread-safe to change afterwards.
 */
#ifndef OCS_DEVSIM_AUTH_H
#define OCS_DEVSIM_AUTH_H

#include <stdbool.h>

struct devsim_auth {
	const char *user;     /* --user */
	const char *password; /* --password; NULL: key authentication only */
	char *hostkey_path;   /* owned; --hostkey or generated */
	bool hostkey_generated;
	const char *tls_cert; /* --tls-cert, --tls-key, --tls-ca: TLS instead of SSH */
	const char *tls_key;
	const char *tls_ca;
};

/* Sets libnetconf2's host key, password, server certificate and trusted CA callbacks. */
void devsim_auth_register(const struct devsim_auth *auth);
/* Generates an ECDSA P-256 host key into auth->hostkey_path. 0 or -errno. */
int devsim_auth_generate_hostkey(struct devsim_auth *auth);
/* Prints "hostkey SHA256:..." of the host key: the value ocsd pins. */
void devsim_auth_print_hostkey(const struct devsim_auth *auth);
/*
 * "04:ab:..." (RFC 7589 tls-fingerprint, SHA-256) of the CA certificate at
 * path, or NULL; caller frees.
 */
char *devsim_auth_ca_fingerprint(const char *path);
/*
 * A TLS endpoint `name` whose clients signed by the CA with `fingerprint`
 * are auth->user. 0 or non-zero.
 */
int devsim_auth_add_tls_endpoint(const struct devsim_auth *auth, const char *name,
				 const char *fingerprint);
/* Removes a generated host key and frees what auth owns. */
void devsim_auth_clear(struct devsim_auth *auth);

#endif
