package httpapi

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The messages of a 401 whose Authorization header holds no usable key, said of what the
// header holds: an empty variable in a shell or a client's settings leaves "Bearer" alone (a
// key not sent, not a wrong scheme), one the shell or the client did not expand leaves its
// name, and quotes pasted with a key stay around it. Newcomer trial h1: each was told to use
// the Bearer scheme, or that the key was malformed, with nothing of why. A key copied from a
// file or a page may bring a character no key has: a byte order mark that Notepad writes at a
// file's start, a no-break or zero-width space from a page (a carriage return from a file with
// Windows line ends never gets here: the server refuses the head, naming the header, h1server).

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
	case strings.IndexFunc(key, foreign) >= 0:
		r, _ := utf8.DecodeRuneInString(key[strings.IndexFunc(key, foreign):])
		return "the API key holds " + characterName(r) + ", which no key has: copied from a file or a page that added it? Send the key alone"
	}
	return "malformed API key: tollgate keys look like 'tgk_…' and are sent as 'Authorization: Bearer <key>'"
}

// foreign reports whether r is no character of a key's: anything but printable ASCII.
func foreign(r rune) bool {
	return r <= ' ' || r > '~'
}

// characterName names r for a refusal: the invisible characters a copied key brings by name.
func characterName(r rune) string {
	switch r {
	case '\uFEFF':
		return "a byte order mark (U+FEFF)"
	case '\u00A0':
		return "a no-break space (U+00A0)"
	case '\u200B':
		return "a zero-width space (U+200B)"
	case ' ':
		return "a space"
	case utf8.RuneError:
		return "a byte that is not UTF-8"
	}
	return fmt.Sprintf("the character U+%04X", r)
}

// quotedStart is s in single quotes, cut to its first 40 bytes: enough to recognise a
// variable's name, not so much that an answer repeats whatever was sent.
func quotedStart(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return "'" + strings.ToValidUTF8(s, "") + "'"
}
