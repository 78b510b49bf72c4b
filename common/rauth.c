/* rauth: the greeting of a control connection over TCP (see rauth.h). */
#include "rauth.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "jcheck.h"
#include "util.h"

static const struct jfield hello_fields[] = {
	{ "v", JT_INT, 1 },
	{ "auth", JT_STRING, 1 },
	{ "nonce", JT_STRING, 1 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield reply_fields[] = {
	{ "v", JT_INT, 1 },
	{ "munge", JT_STRING, 1 },
	{ "role", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

static const struct jfield verdict_fields[] = {
	{ "v", JT_INT, 1 },
	{ "ok", JT_BOOL, 1 },
	{ "uid", JT_INT, 0 },
	{ "gid", JT_INT, 0 },
	{ "error", JT_STRING, 0 },
	{ NULL, JT_ANY, 0 },
};

long
rauth_line(const char *buf, size_t len)
{
	size_t look = len < RAUTH_MAX_LINE + 1 ? len : RAUTH_MAX_LINE + 1;
	const char *nl = memchr(buf, '\n', look);

	if (nl)
		return (long)(nl - buf);
	return len > RAUTH_MAX_LINE ? -2 : -1;
}

/* LINE as an object of FIELDS and this version.  The object, or NULL with
 * ERR. */
static json_t *
load(const char *line, size_t len, const struct jfield *fields,
     const char *what, char *err, size_t n)
{
	json_error_t je;
	struct jerr e;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);

	if (o == NULL) {
		ft_snprintf(err, n, "%s: not JSON: %s", what, je.text);
		return NULL;
	}
	if (jcheck_object(o, "", fields, &e) == -1) {
		ft_snprintf(err, n, "%s: %s%s%s", what, e.path,
			    *e.path ? ": " : "", e.msg);
		goto fail;
	}
	if (jget_int(o, "v", 0) != RAUTH_VERSION) {
		ft_snprintf(err, n, "%s: protocol version %lld, this end "
			    "speaks %d", what, jget_int(o, "v", 0),
			    RAUTH_VERSION);
		goto fail;
	}
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* O's members dumped as one line with a newline (a new string). */
static char *
line_of(json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT), *line;

	json_decref(o);
	if (text == NULL)
		return ft_strdup("{}\n");
	line = ft_asprintf("%s\n", text);
	free(text);
	return line;
}

char *
rauth_hello(const char *nonce)
{
	return line_of(json_pack("{s:i, s:s, s:s}", "v", RAUTH_VERSION,
				 "auth", "munge", "nonce", nonce));
}

/* Is S RAUTH_NONCE_HEX lower-case hex digits? */
static int
is_nonce(const char *s)
{
	return strlen(s) == RAUTH_NONCE_HEX &&
	       strspn(s, "0123456789abcdef") == RAUTH_NONCE_HEX;
}

int
rauth_parse_hello(const char *line, size_t len,
		  char nonce[RAUTH_NONCE_HEX + 1], char *err, size_t n)
{
	json_t *o = load(line, len, hello_fields, "the master's greeting", err,
			 n);
	int rc = -1;

	if (o == NULL)
		return -1;
	if (strcmp(jget_str(o, "auth", ""), "munge") != 0)
		ft_snprintf(err, n, "the master asks for authentication by "
			    "\"%s\", not munge", jget_str(o, "auth", ""));
	else if (!is_nonce(jget_str(o, "nonce", "")))
		ft_snprintf(err, n, "the master's greeting: a malformed nonce");
	else {
		memcpy(nonce, jget_str(o, "nonce", ""), RAUTH_NONCE_HEX + 1);
		rc = 0;
	}
	json_decref(o);
	return rc;
}

char *
rauth_reply(const char *cred, enum rauth_role role)
{
	if (role == RAUTH_AGENT)
		return line_of(json_pack("{s:i, s:s, s:s}", "v", RAUTH_VERSION,
					 "munge", cred, "role", "agent"));
	return line_of(json_pack("{s:i, s:s}", "v", RAUTH_VERSION, "munge",
				 cred));
}

int
rauth_parse_reply(const char *line, size_t len, char **cred,
		  enum rauth_role *role, char *err, size_t n)
{
	json_t *o = load(line, len, reply_fields, "greeting", err, n);
	const char *s, *r;

	*cred = NULL;
	*role = RAUTH_CLIENT;
	if (o == NULL)
		return -1;
	r = jget_str(o, "role", "client");
	if (strcmp(r, "agent") == 0) {
		*role = RAUTH_AGENT;
	} else if (strcmp(r, "client") != 0) {
		ft_snprintf(err, n, "greeting: role: \"%s\" is neither "
			    "\"client\" nor \"agent\"", r);
		json_decref(o);
		return -1;
	}
	s = jget_str(o, "munge", "");
	/* MUNGE's credentials are base64 between "MUNGE:" and ":". */
	if (strncmp(s, "MUNGE:", 6) != 0 ||
	    strspn(s + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		   "0123456789+/=:") != strlen(s + 6)) {
		ft_snprintf(err, n, "greeting: munge: not a MUNGE credential");
		json_decref(o);
		return -1;
	}
	*cred = ft_strdup(s);
	json_decref(o);
	return 0;
}

int
rauth_payload_ok(const char *nonce, const void *payload, int len)
{
	return payload && len == RAUTH_NONCE_HEX &&
	       memcmp(payload, nonce, RAUTH_NONCE_HEX) == 0;
}

char *
rauth_verdict(const char *err, unsigned uid, unsigned gid)
{
	if (err)
		return line_of(json_pack("{s:i, s:b, s:s}", "v", RAUTH_VERSION,
					 "ok", 0, "error", err));
	return line_of(json_pack("{s:i, s:b, s:I, s:I}", "v", RAUTH_VERSION,
				 "ok", 1, "uid", (json_int_t)uid, "gid",
				 (json_int_t)gid));
}

int
rauth_parse_verdict(const char *line, size_t len, unsigned *uid, char *err,
		    size_t n)
{
	json_t *o = load(line, len, verdict_fields, "the master's verdict",
			 err, n);
	int rc = -1;

	if (o == NULL)
		return -1;
	if (!jget_bool(o, "ok", 0))
		ft_snprintf(err, n, "refused: %s",
			    jget_str(o, "error", "no reason given"));
	else {
		*uid = (unsigned)jget_int(o, "uid", -1);
		rc = 0;
	}
	json_decref(o);
	return rc;
}

int
rauth_nonce(char nonce[RAUTH_NONCE_HEX + 1])
{
	unsigned char raw[RAUTH_NONCE_HEX / 2];
	size_t i;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	for (i = 0; i < sizeof(raw); i++)
		snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
	return 0;
}
