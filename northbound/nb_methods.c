/*
 * nb_methods.c - the table of served methods (path, message types, the
 * least role allowed to call it), code and role names, and the role a
 * client certificate grants (subject OU, read with OpenSSL).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <grpc/support/log.h>
#include <openssl/bio.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "nb_internal.h"

static const struct nb_method_info methods[NB_METHOD_COUNT] = {
	[NB_FABRIC_GET_FABRIC] = {"/ocs.v1.Fabric/GetFabric",
				  &ocs__v1__get_fabric_request__descriptor,
				  &ocs__v1__fabric_summary__descriptor, NB_ROLE_VIEWER, false,
				  false},
	[NB_FABRIC_LIST_DEVICES] = {"/ocs.v1.Fabric/ListDevices",
				    &ocs__v1__list_devices_request__descriptor,
				    &ocs__v1__list_devices_response__descriptor, NB_ROLE_VIEWER,
				    false, false},
	[NB_FABRIC_LIST_CIRCUITS] = {"/ocs.v1.Fabric/ListCircuits",
				     &ocs__v1__list_circuits_request__descriptor,
				     &ocs__v1__list_circuits_response__descriptor, NB_ROLE_VIEWER,
				     false, false},
	[NB_FABRIC_DRAIN_DEVICE] = {"/ocs.v1.Fabric/DrainDevice",
				    &ocs__v1__drain_device_request__descriptor,
				    &ocs__v1__drain_device_response__descriptor, NB_ROLE_OPERATOR,
				    false, false},
	[NB_FABRIC_UNDRAIN_DEVICE] = {"/ocs.v1.Fabric/UndrainDevice",
				      &ocs__v1__undrain_device_request__descriptor,
				      &ocs__v1__undrain_device_response__descriptor,
				      NB_ROLE_OPERATOR, false, false},
	[NB_FABRIC_MARK_NODE] = {"/ocs.v1.Fabric/MarkNode", &ocs__v1__mark_node_request__descriptor,
				 &ocs__v1__mark_node_response__descriptor, NB_ROLE_OPERATOR, false,
				 false},
	[NB_FABRIC_LIST_RINGS] = {"/ocs.v1.Fabric/ListRings",
				  &ocs__v1__list_rings_request__descriptor,
				  &ocs__v1__list_rings_response__descriptor, NB_ROLE_VIEWER, false,
				  false},
	[NB_FABRIC_LIST_DRIFT] = {"/ocs.v1.Fabric/ListDrift",
				  &ocs__v1__list_drift_request__descriptor,
				  &ocs__v1__list_drift_response__descriptor, NB_ROLE_VIEWER, false,
				  false},
	[NB_FABRIC_ADOPT_CROSS_CONNECTS] = {"/ocs.v1.Fabric/AdoptCrossConnects",
					    &ocs__v1__adopt_cross_connects_request__descriptor,
					    &ocs__v1__adopt_cross_connects_response__descriptor,
					    NB_ROLE_OPERATOR, false, false},
	[NB_FABRIC_CLEAR_CROSS_CONNECTS] = {"/ocs.v1.Fabric/ClearCrossConnects",
					    &ocs__v1__clear_cross_connects_request__descriptor,
					    &ocs__v1__clear_cross_connects_response__descriptor,
					    NB_ROLE_OPERATOR, false, false},
	[NB_FABRIC_REPLACE_GPU] = {"/ocs.v1.Fabric/ReplaceGpu",
				   &ocs__v1__replace_gpu_request__descriptor,
				   &ocs__v1__replace_gpu_response__descriptor, NB_ROLE_SCHEDULER,
				   false, false},
	[NB_FABRIC_MARK_GPU] = {"/ocs.v1.Fabric/MarkGpu", &ocs__v1__mark_gpu_request__descriptor,
				&ocs__v1__mark_gpu_response__descriptor, NB_ROLE_OPERATOR, false,
				false},
	[NB_FABRIC_LIST_RAIL_PORTS] = {"/ocs.v1.Fabric/ListRailPorts",
				       &ocs__v1__list_rail_ports_request__descriptor,
				       &ocs__v1__list_rail_ports_response__descriptor,
				       NB_ROLE_VIEWER, false, false},
	[NB_FABRIC_LIST_CABLING] = {"/ocs.v1.Fabric/ListCabling",
				    &ocs__v1__list_cabling_request__descriptor,
				    &ocs__v1__list_cabling_response__descriptor, NB_ROLE_VIEWER,
				    false, false},
	[NB_FABRIC_CLEAR_CABLING] = {"/ocs.v1.Fabric/ClearCabling",
				     &ocs__v1__clear_cabling_request__descriptor,
				     &ocs__v1__clear_cabling_response__descriptor, NB_ROLE_OPERATOR,
				     false, false},
	[NB_JOBS_SUBMIT_JOB] = {"/ocs.v1.Jobs/SubmitJob", &ocs__v1__job_spec__descriptor,
				&ocs__v1__submit_job_response__descriptor, NB_ROLE_SCHEDULER, false,
				false},
	[NB_JOBS_PLAN_JOB] = {"/ocs.v1.Jobs/PlanJob", &ocs__v1__job_spec__descriptor,
			      &ocs__v1__plan_job_response__descriptor, NB_ROLE_SCHEDULER, false,
			      false},
	[NB_JOBS_RELEASE_JOB] = {"/ocs.v1.Jobs/ReleaseJob",
				 &ocs__v1__release_job_request__descriptor,
				 &ocs__v1__release_job_response__descriptor, NB_ROLE_SCHEDULER,
				 false, false},
	[NB_JOBS_GET_JOB] = {"/ocs.v1.Jobs/GetJob", &ocs__v1__get_job_request__descriptor,
			     &ocs__v1__get_job_response__descriptor, NB_ROLE_VIEWER, false, false},
	[NB_JOBS_LIST_JOBS] = {"/ocs.v1.Jobs/ListJobs", &ocs__v1__list_jobs_request__descriptor,
			       &ocs__v1__list_jobs_response__descriptor, NB_ROLE_VIEWER, false,
			       false},
	[NB_EVENTS_WATCH] = {"/ocs.v1.Events/Watch", &ocs__v1__watch_request__descriptor,
			     &ocs__v1__event__descriptor, NB_ROLE_VIEWER, true, true},
	[NB_HEALTH_CHECK] = {"/grpc.health.v1.Health/Check",
			     &grpc__health__v1__health_check_request__descriptor,
			     &grpc__health__v1__health_check_response__descriptor, NB_ROLE_NONE,
			     false, true},
	[NB_HEALTH_WATCH] = {"/grpc.health.v1.Health/Watch",
			     &grpc__health__v1__health_check_request__descriptor,
			     &grpc__health__v1__health_check_response__descriptor, NB_ROLE_NONE,
			     true, true},
};

const struct nb_method_info *nb_method_info(enum nb_method m)
{
	return (unsigned)m < NB_METHOD_COUNT ? &methods[m] : NULL;
}

const char *nb_method_path(enum nb_method m)
{
	return (unsigned)m < NB_METHOD_COUNT ? methods[m].path : "";
}

const char *nb_method_name(enum nb_method m)
{
	const char *path = nb_method_path(m);
	const char *dot = strrchr(path, '.');

	return dot ? dot + 1 : path; /* "/ocs.v1.Jobs/SubmitJob" -> "Jobs/SubmitJob" */
}

enum nb_role nb_method_min_role(enum nb_method m)
{
	return (unsigned)m < NB_METHOD_COUNT ? methods[m].min_role : NB_ROLE_OPERATOR;
}

enum nb_method nb_method_from_path(const char *path, size_t len)
{
	for (int m = 0; m < NB_METHOD_COUNT; m++)
		if (strlen(methods[m].path) == len && memcmp(methods[m].path, path, len) == 0)
			return (enum nb_method)m;
	return NB_METHOD_COUNT;
}

const char *nb_role_name(enum nb_role r)
{
	switch (r) {
	case NB_ROLE_VIEWER:
		return "viewer";
	case NB_ROLE_SCHEDULER:
		return "scheduler";
	case NB_ROLE_OPERATOR:
		return "operator";
	case NB_ROLE_NONE:
		break;
	}
	return "none";
}

const char *nb_code_name(enum nb_code c)
{
	switch (c) {
	case NB_OK:
		return "OK";
	case NB_CANCELLED:
		return "CANCELLED";
	case NB_INVALID_ARGUMENT:
		return "INVALID_ARGUMENT";
	case NB_DEADLINE_EXCEEDED:
		return "DEADLINE_EXCEEDED";
	case NB_NOT_FOUND:
		return "NOT_FOUND";
	case NB_ALREADY_EXISTS:
		return "ALREADY_EXISTS";
	case NB_PERMISSION_DENIED:
		return "PERMISSION_DENIED";
	case NB_RESOURCE_EXHAUSTED:
		return "RESOURCE_EXHAUSTED";
	case NB_FAILED_PRECONDITION:
		return "FAILED_PRECONDITION";
	case NB_ABORTED:
		return "ABORTED";
	case NB_UNIMPLEMENTED:
		return "UNIMPLEMENTED";
	case NB_INTERNAL:
		return "INTERNAL";
	case NB_UNAVAILABLE:
		return "UNAVAILABLE";
	}
	return "UNKNOWN";
}

const char *nb_fabric_kind_name(enum nb_fabric_kind k)
{
	switch (k) {
	case NB_FABRIC_LEAF_SPINE_OCS:
		return "leaf-spine-ocs";
	case NB_FABRIC_OCSTRX_RING:
		return "ocstrx-ring";
	case NB_FABRIC_RAIL_OCS:
		return "rail-ocs";
	}
	return "unknown";
}

int nb_error_set(struct nb_error *err, enum nb_code code, const char *field, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -EINVAL;
	err->code = code;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static enum nb_role role_from_ou(const char *ou)
{
	if (strcmp(ou, "viewer") == 0)
		return NB_ROLE_VIEWER;
	if (strcmp(ou, "scheduler") == 0)
		return NB_ROLE_SCHEDULER;
	if (strcmp(ou, "operator") == 0)
		return NB_ROLE_OPERATOR;
	return NB_ROLE_NONE;
}

enum nb_role nb_role_from_cert_pem(const char *pem, size_t len, char *cn, size_t cn_len)
{
	enum nb_role role = NB_ROLE_NONE;
	int roles_seen = 0;
	bool nul_ou = false;
	BIO *bio;
	X509 *cert;
	X509_NAME *subject;

	if (cn && cn_len)
		cn[0] = '\0';
	if (!pem || len == 0 || len > (size_t)1 << 20)
		return NB_ROLE_NONE;
	bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio)
		return NB_ROLE_NONE;
	cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (!cert)
		return NB_ROLE_NONE;
	subject = X509_get_subject_name(cert);
	if (cn && cn_len)
		X509_NAME_get_text_by_NID(subject, NID_commonName, cn, (int)cn_len);
	for (int i = -1;
	     (i = X509_NAME_get_index_by_NID(subject, NID_organizationalUnitName, i)) >= 0;) {
		ASN1_STRING *data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
		unsigned char *utf8 = NULL;
		int n = ASN1_STRING_to_UTF8(&utf8, data);
		enum nb_role r;

		if (n < 0)
			continue;
		/* The compare below reads a C string: an OU of "operator\0viewer"
		 * would read as "operator". An OU holding a NUL is not a name
		 * anyone meant; the certificate grants nothing. */
		if (memchr(utf8, '\0', (size_t)n)) {
			nul_ou = true;
			OPENSSL_free(utf8);
			continue;
		}
		r = role_from_ou((const char *)utf8);
		OPENSSL_free(utf8);
		if (r != NB_ROLE_NONE) {
			role = r;
			roles_seen++;
		}
	}
	if (nul_ou) /* the CN is not quoted: it is the sender's bytes */
		gpr_log(GPR_ERROR, "client certificate refused a role: an OU holds a NUL byte");
	X509_free(cert);
	return roles_seen == 1 && !nul_ou ? role : NB_ROLE_NONE;
}
