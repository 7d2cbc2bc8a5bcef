/*
 * devsim_auth.c - ocs-devsim's SSH and TLS credentials (devsim_auth.h).
 */
#include "devsim_auth.h"

#include <errno.h>
#include <libssh/libssh.h>
#include <nc_server.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- SSH ----------------------------------------------------------------- */

static int passwd_clb(const struct nc_session *session, const char *password, void *user_data)
{
	const struct devsim_auth *auth = user_data;
	const char *user = nc_session_get_username(session);
	if (!auth->password || !user || !auth->user || strcmp(user, auth->user))
		return 1;
	return strcmp(password, auth->password) ? 1 : 0;
}

static int hostkey_clb(const char *name, void *user_data, char **privkey_path, char **privkey_data,
		       NC_SSH_KEY_TYPE *privkey_type)
{
	const struct devsim_auth *auth = user_data;
	*privkey_path = strdup(auth->hostkey_path);
	return *privkey_path ? 0 : -1;
}

int devsim_auth_generate_hostkey(struct devsim_auth *auth)
{
	char tmpl[] = "/tmp/ocs-devsim-hostkey-XXXXXX";
	int fd = mkstemp(tmpl);
	if (fd < 0)
		return -errno;
	close(fd);
	ssh_key key = NULL;
	if (ssh_pki_generate(SSH_KEYTYPE_ECDSA_P256, 256, &key) != SSH_OK ||
	    ssh_pki_export_privkey_file(key, NULL, NULL, NULL, tmpl) != SSH_OK) {
		ssh_key_free(key);
		unlink(tmpl);
		return -EIO;
	}
	ssh_key_free(key);
	auth->hostkey_path = strdup(tmpl);
	auth->hostkey_generated = true;
	return auth->hostkey_path ? 0 : -ENOMEM;
}

void devsim_auth_print_hostkey(const struct devsim_auth *auth)
{
	ssh_key priv = NULL, pub = NULL;
	unsigned char *hash = NULL;
	size_t hlen = 0;
	if (ssh_pki_import_privkey_file(auth->hostkey_path, NULL, NULL, NULL, &priv) == SSH_OK &&
	    ssh_pki_export_privkey_to_pubkey(priv, &pub) == SSH_OK &&
	    ssh_get_publickey_hash(pub, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == 0) {
		char *fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
		printf("hostkey %s\n", fp ? fp : "?");
		ssh_string_free_char(fp);
		ssh_clean_pubkey_hash(&hash);
	}
	ssh_key_free(pub);
	ssh_key_free(priv);
}

/* ---- TLS ----------------------------------------------------------------- */

static int tls_cert_clb(const char *name, void *user_data, char **cert_path, char **cert_data,
			char **privkey_path, char **privkey_data, NC_SSH_KEY_TYPE *privkey_type)
{
	const struct devsim_auth *auth = user_data;
	*cert_path = strdup(auth->tls_cert);
	*privkey_path = strdup(auth->tls_key);
	return (*cert_path && *privkey_path) ? 0 : -1;
}

/* The trusted list "clients": the CA of --tls-ca. */
static int tls_trusted_clb(const char *name, void *user_data, char ***cert_paths,
			   int *cert_path_count, char ***cert_data, int *cert_data_count)
{
	const struct devsim_auth *auth = user_data;
	*cert_paths = malloc(sizeof(char *));
	if (!*cert_paths || !((*cert_paths)[0] = strdup(auth->tls_ca)))
		return -1;
	*cert_path_count = 1;
	*cert_data = NULL;
	*cert_data_count = 0;
	return 0;
}

char *devsim_auth_ca_fingerprint(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	X509 *cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char *out = NULL;
	if (cert && X509_digest(cert, EVP_sha256(), md, &len) && (out = malloc(3 + 3 * len))) {
		char *p = out + sprintf(out, "04");
		for (unsigned int i = 0; i < len; i++)
			p += sprintf(p, ":%02x", md[i]);
	}
	X509_free(cert);
	return out;
}

int devsim_auth_add_tls_endpoint(const struct devsim_auth *auth, const char *name,
				 const char *fingerprint)
{
	return nc_server_add_endpt(name, NC_TI_OPENSSL) ||
	       nc_server_tls_endpt_set_server_cert(name, "server") ||
	       nc_server_tls_endpt_add_trusted_cert_list(name, "clients") ||
	       nc_server_tls_endpt_add_ctn(name, 1, fingerprint, NC_TLS_CTN_SPECIFIED, auth->user);
}

void devsim_auth_register(const struct devsim_auth *auth)
{
	/* the callbacks only read auth */
	void *data = (void *)auth;
	nc_server_ssh_set_hostkey_clb(hostkey_clb, data, NULL);
	nc_server_ssh_set_passwd_auth_clb(passwd_clb, data, NULL);
	nc_server_tls_set_server_cert_clb(tls_cert_clb, data, NULL);
	nc_server_tls_set_trusted_cert_list_clb(tls_trusted_clb, data, NULL);
}

void devsim_auth_clear(struct devsim_auth *auth)
{
	if (auth->hostkey_generated)
		unlink(auth->hostkey_path);
	free(auth->hostkey_path);
	auth->hostkey_path = NULL;
	auth->hostkey_generated = false;
}
