package httpapi

import (
	"strings"
)

// The messages of a 401 whose Authorization header holds no usable key, said of what the
// header holds: an empty variable in a shell or a client's settings leaves "Bearer" alone (a
// key not sent, not a wrong scheme), one the shell or the client did not expand leaves its
// name, and quotes pasted with a key stay around it. Newcomer trial h1: each was told to use
// the Bearer scheme, or that the key was malformed, with nothing of why.

// schemeRefusal is the message of a header refused as not of the Bearer scheme.
func schemeRefusal(header string) string {
	if strings.EqualFold(strings.TrimSpace(header), "Bearer") {
		return "the Authorization header has no key after 'Bearer': the variable that should hold it (such as $TOLLGATE_API_KEY) is empty or unset where the request was made"
	}
	return "the Authorization header must use the Bearer scheme: 'Authorization: Bearer <key>'"
}

// malformedRefusal is the message of a Bearer credential refused as no tollgate key.
func malformedRefusal(header string) string {
	_, key, _ := strings.Cut(strings.TrimSpace(header), " ")
	key = strings.TrimSpace(key)
	switch {
	case strings.HasPrefix(key, "$") || strings.HasPrefix(key, "%") && strings.HasSuffix(key, "%"):
		return "the Authorization header holds a variable's name (" + quotedStart(key) + "), not a key: the shell or the client did not expand it (single quotes, or a setting that does not expand variables)"
	case len(key) > 1 && (key[0] == '"' || key[0] == '\'') && key[len(key)-1] == key[0]:
		return "the API key is sent with quotes around it: send the key alone, 'Authorization: Bearer tgk_…'"
	}
	return "malformed API key: tollgate keys look like 'tgk_…' and are sent as 'Authorization: Bearer <key>'"
}

// quotedStart is s in single quotes, cut to its first 40 bytes: enough to recognise a
// variable's name, not so much that an answer repeats whatever was sent.
func quotedStart(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return "'" + strings.ToValidUTF8(s, "") + "'"
}
