package h1server

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/tollgate/tollgate/impl/httpfield"
)

// verdict is what the head parser decided about the bytes buffered for a request.
type verdict int

const (
	// needMore: the head is not complete yet and nothing seen so far rules the lean path out.
	needMore verdict = iota
	// serveLean: a complete head the lean path serves.
	serveLean
	// handOff: a request for net/http (not plain HTTP/1.1, or not strictly valid).
	handOff
	// ambiguousLength: a head with both Content-Length and Transfer-Encoding, which the lean
	// path refuses (400) and closes the connection after (RFC 9112 section 6.3: the server MUST
	// close it; net/http serves the request and keeps the connection, so that a front framing by
	// Content-Length would read a pipelined request as this one's body).
	ambiguousLength
)

// field is one header line of a scanned head, as offsets into the head: the name is
// [start:colon] and the untrimmed value [colon+1:end].
type field struct{ start, colon, end int32 }

// Which header a field is, for the ones the parser treats specially.
const (
	fieldOther = iota
	fieldHost
	fieldContentLength
	fieldConnection
	fieldHandOff // Expect, Upgrade: always net/http's
	fieldTransferEncoding
)

// headScan is the state and result of scanning a head. Scanning resumes where it stopped when
// more bytes arrive, so a head that trickles in costs linear work; its zero value is the state
// for a new head (reset). It lives in the connection's pooled buffers, so scanning allocates
// nothing.
type headScan struct {
	next        int // offset of the first line not scanned yet; 0 before the request line
	n           int // length of the head, through the blank line, once complete
	methodEnd   int
	targetStart int
	targetEnd   int
	fields      []field
	host        int // 1 + the index in fields of the Host line, or 0
	clen        int // 1 + the index in fields of the Content-Length line, or 0
	hasConn     bool
	te          bool // a Transfer-Encoding line was seen: the request is net/http's
}

// reset prepares the scan for a new head, keeping the fields slice's storage.
func (sc *headScan) reset() { *sc = headScan{fields: sc.fields[:0]} }

// scanHead checks b, the buffered bytes at the start of a request, for a complete head that the
// lean path may serve, continuing from where the previous call on the same head stopped. It
// accepts only what net/http accepts and would parse the same way: every line ends in CRLF; the
// request line is a token method, an origin-form target of visible ASCII and exactly
// "HTTP/1.1"; header names are tokens and values hold no control characters other than HTAB;
// there is exactly one Host, at most one Content-Length and no Transfer-Encoding, Expect,
// Upgrade or folded line (a complete head with both Content-Length and Transfer-Encoding is
// ambiguousLength). It returns needMore when the head is incomplete and no line seen so
// far rules the lean path out. The values that need strings (the target's URL, the Host and
// Content-Length values, the Connection tokens) are checked by buildRequest.
func scanHead(b []byte, sc *headScan) verdict {
	if sc.next == 0 {
		eol := bytes.IndexByte(b, '\n')
		if eol < 0 {
			return needMore
		}
		if !scanRequestLine(b[:eol+1], sc) {
			return handOff
		}
		sc.next = eol + 1
	}
	for {
		pos := sc.next
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return needMore
		}
		eol := pos + i
		if eol == pos || b[eol-1] != '\r' {
			return handOff // bare LF: net/http accepts it, the lean path does not
		}
		line := b[pos : eol-1]
		if len(line) == 0 {
			sc.n = eol + 1
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			return handOff // obsolete line folding
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !httpfield.IsToken(line[:colon]) {
			return handOff
		}
		for _, c := range line[colon+1:] {
			if !httpfield.ValidValueByte(c) {
				return handOff
			}
		}
		switch classify(line[:colon]) {
		case fieldHost:
			if sc.host > 0 {
				return handOff
			}
			sc.host = len(sc.fields) + 1
		case fieldContentLength:
			if sc.clen > 0 {
				return handOff
			}
			sc.clen = len(sc.fields) + 1
		case fieldTransferEncoding:
			// net/http's, unless the head has a Content-Length too: read on to know.
			sc.te = true
		case fieldConnection:
			sc.hasConn = true
		case fieldHandOff:
			return handOff
		}
		sc.fields = append(sc.fields, field{int32(pos), int32(pos + colon), int32(eol - 1)})
		sc.next = eol + 1
	}
	if sc.te {
		if sc.clen > 0 {
			return ambiguousLength
		}
		return handOff
	}
	if sc.host == 0 {
		return handOff
	}
	return serveLean
}

// bareCRReason is the reason, naming the header, given for a refused head whose header value
// holds a bare CR (one not before its line's LF), head being the bytes from its request line
// on, or "" when no header line of the head does. RFC 9112 section 2.2 lets a recipient read a
// bare CR as a space or refuse the message; the server refuses it, as net/http does, but says
// where and why: a key pasted from a file with Windows line ends ("tgk_…\r") brings its CR
// into the header, and net/http's "invalid header value" tells its sender nothing of that.
// (Reading it as a space would make the key work, but a front that takes a bare CR for a
// line's end would then read other headers than the server: the framing of a request must not
// depend on it.) It runs only for a refusal, whatever request line the head has (an
// absolute-form target, HTTP/1.0), so that the lean path's scan does nothing for it.
//
// The header is named only when its name is a token: the reason goes into the status line of
// the plain answer, which must not carry a CR the sender chose.
func bareCRReason(head []byte) string {
	_, rest, ok := bytes.Cut(bytes.TrimLeft(head, "\r\n"), []byte("\n")) // the request line
	for ok {
		var line []byte
		if line, rest, ok = bytes.Cut(rest, []byte("\n")); !ok {
			return "" // a line not complete: not the one net/http refused
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			return "" // the end of the head
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.IndexByte(line[colon+1:], '\r') < 0 {
			continue
		}
		if !httpfield.IsToken(line[:colon]) {
			// Not a name to repeat: the plain answer would carry a CR of the sender's in its
			// status line.
			return "a header line holds a carriage return, which HTTP/1.1 allows only before a line's end"
		}
		name := canonicalKey(string(line[:colon]))
		switch name {
		case "Authorization", "X-Api-Key", "Api-Key":
			return "the " + name + " header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"
		}
		return "the " + name + " header holds a carriage return, which a header value may not"
	}
	return ""
}

// scanRequestLine checks the request line (with its line end) and records where its parts are.
func scanRequestLine(line []byte, sc *headScan) bool {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return false // bare LF
	}
	line = line[:len(line)-2]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || !httpfield.IsToken(line[:sp]) || string(line[:sp]) == "CONNECT" {
		return false
	}
	rest := line[sp+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 || string(rest[sp2+1:]) != "HTTP/1.1" {
		return false
	}
	target := rest[:sp2]
	if len(target) == 0 || target[0] != '/' {
		return false // asterisk-form, absolute-form, authority-form or empty
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	sc.methodEnd = sp
	sc.targetStart = sp + 1
	sc.targetEnd = sp + 1 + sp2
	return true
}

// classify tells the specially treated header names apart, ignoring case.
func classify(name []byte) int {
	switch len(name) {
	case 4:
		if equalFold(name, "host") {
			return fieldHost
		}
	case 6:
		if equalFold(name, "expect") {
			return fieldHandOff
		}
	case 7:
		if equalFold(name, "upgrade") {
			return fieldHandOff
		}
	case 10:
		if equalFold(name, "connection") {
			return fieldConnection
		}
	case 14:
		if equalFold(name, "content-length") {
			return fieldContentLength
		}
	case 17:
		if equalFold(name, "transfer-encoding") {
			return fieldTransferEncoding
		}
	}
	return fieldOther
}

// equalFold reports whether b equals the lower-case ASCII string lower, ignoring case.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// parsedHead holds the strings of a head that buildRequest accepted. It lives in the request's
// exchange, so that the URL and the first values of up to eight header keys need no allocation
// of their own.
type parsedHead struct {
	method        string
	requestURI    string
	url           *url.URL
	header        http.Header
	host          string
	contentLength int64
	close         bool

	urlStore url.URL
	strStore [8]string
}

// buildRequest turns a head that scanHead accepted into strings, copying the head once and
// slicing every string from that copy, and makes the checks that need them. It reports false
// when net/http must serve the request after all.
func buildRequest(b []byte, sc *headScan, ph *parsedHead) bool {
	s := string(b[:sc.n])
	u, ok := parseTarget(s[sc.targetStart:sc.targetEnd], &ph.urlStore)
	if !ok {
		return false
	}
	hf := sc.fields[sc.host-1]
	host := trimOWS(s[hf.colon+1 : hf.end])
	if !httpguts.ValidHostHeader(host) {
		return false
	}
	var clen int64
	if sc.clen > 0 {
		f := sc.fields[sc.clen-1]
		var ok bool
		if clen, ok = httpfield.ParseContentLength(trimOWS(s[f.colon+1 : f.end])); !ok {
			return false
		}
	}

	// Like textproto, cut every key's first value from one slice so that single-valued keys
	// cost no allocation of their own.
	n := len(sc.fields) - 1 // without Host, which net/http's server removes
	h := make(http.Header, n)
	strs := ph.strStore[:]
	if n > len(strs) {
		strs = make([]string, n)
	}
	for i, f := range sc.fields {
		if i == sc.host-1 {
			continue
		}
		key := canonicalKey(s[f.start:f.colon])
		value := trimOWS(s[f.colon+1 : f.end])
		vv := h[key]
		if vv == nil && len(strs) > 0 {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = value
			h[key] = vv
		} else {
			h[key] = append(vv, value)
		}
	}
	closeConn := false
	if sc.hasConn {
		conn := h["Connection"]
		if httpguts.HeaderValuesContainsToken(conn, "upgrade") {
			return false
		}
		closeConn = httpguts.HeaderValuesContainsToken(conn, "close")
	}
	// net/http's fixPragmaCacheControl.
	if hp := h["Pragma"]; len(hp) > 0 && hp[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}

	ph.method = s[:sc.methodEnd]
	ph.requestURI = s[sc.targetStart:sc.targetEnd]
	ph.url = u
	ph.header = h
	ph.host = host
	ph.contentLength = clen
	ph.close = closeConn
	if u.Host != "" { // never for origin-form, but this is net/http's rule
		ph.host = u.Host
	}
	return true
}

// parseTarget is url.ParseRequestURI for an origin-form target. A target whose path holds only
// characters that net/url keeps as they are (no percent-escapes) is split into dst without
// parsing or allocating; any other goes through url.ParseRequestURI.
func parseTarget(target string, dst *url.URL) (*url.URL, bool) {
	path, query, hasQuery := strings.Cut(target, "?")
	for i := 0; i < len(path); i++ {
		if !plainPathByte[path[i]] {
			u, err := url.ParseRequestURI(target)
			return u, err == nil
		}
	}
	// As net/url: a lone "?" at the end forces an empty query, otherwise the query is what
	// follows the first "?".
	*dst = url.URL{Path: path, RawQuery: query, ForceQuery: hasQuery && query == ""}
	return dst, true
}

// plainPathByte tells the bytes a path may hold for parseTarget's shortcut: those net/url
// itself leaves unescaped in a path. It asks net/url rather than copy its tables.
var plainPathByte = func() (t [256]bool) {
	for c := 0x21; c < 0x7f; c++ {
		if c == '%' || c == '?' || c == '#' {
			continue
		}
		p := "/a" + string(rune(c))
		if u, err := url.ParseRequestURI(p); err == nil && u.Path == p && u.RawPath == "" && u.RawQuery == "" && !u.ForceQuery && u.Host == "" {
			t[c] = true
		}
	}
	return t
}()

// trimOWS removes leading and trailing spaces and tabs, as textproto does with header values.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// canonicalKey returns textproto.CanonicalMIMEHeaderKey(name) for a token name. A name that is
// already canonical is returned as it is (a slice of the head, no allocation); a common one
// written in another case is returned from an interned table, and only other names are copied.
func canonicalKey(name string) string {
	upper := true
	canonical := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
			break
		}
		upper = c == '-'
	}
	if canonical {
		return name
	}
	var stack [64]byte
	var buf []byte
	if len(name) <= len(stack) {
		buf = stack[:len(name)]
	} else {
		buf = make([]byte, len(name))
	}
	upper = true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
		upper = c == '-'
	}
	if v, ok := commonHeaders[string(buf)]; ok { // this lookup does not copy buf
		return v
	}
	return string(buf)
}

// commonHeaders interns the canonical forms of request header names that clients often send
// in lower case.
var commonHeaders = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Anthropic-Beta",
		"Anthropic-Version", "Authorization", "Cache-Control", "Connection", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Type", "Cookie", "Date", "Dnt", "Etag",
		"From", "Idempotency-Key", "If-Match", "If-Modified-Since", "If-None-Match", "If-Range",
		"If-Unmodified-Since", "Keep-Alive", "Openai-Organization", "Openai-Project", "Origin",
		"Pragma", "Priority", "Range", "Referer", "Sec-Fetch-Dest", "Sec-Fetch-Mode",
		"Sec-Fetch-Site", "Te", "Traceparent", "Tracestate", "Trailer", "User-Agent", "Via",
		"X-Api-Key", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip",
		"X-Request-Id", "X-Stainless-Arch", "X-Stainless-Lang", "X-Stainless-Os",
		"X-Stainless-Package-Version", "X-Stainless-Retry-Count", "X-Stainless-Runtime",
		"X-Stainless-Runtime-Version", "X-Stainless-Timeout",
	} {
		m[k] = k
	}
	return m
}()
