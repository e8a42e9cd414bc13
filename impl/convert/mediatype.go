package convert

import (
	"bytes"
	"strings"

	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/jsonview"
)

// normalMediaType is the media type s as RFC 2045 reads it: its case aside, without its
// parameters and the white space around it ("Application/PDF; name=x.pdf" is application/pdf).
// A media type that is so already is returned as it is, without an allocation.
func normalMediaType(s string) string {
	if normal(s) {
		return s
	}
	if semi := strings.IndexByte(s, ';'); semi >= 0 {
		s = s[:semi]
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// normal reports whether the media type s needs no change by normalMediaType: no upper-case
// letter, no parameter, no white space.
func normal(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' || c == ';' || c == ' ' || c == '\t' {
			return false
		}
	}
	return true
}

// mediaTypeKey is the member of a Messages image or document source that names its type.
var mediaTypeKey = []byte(`"media_type"`)

// NormalizeMediaTypes rewrites, with an edit, the media_type of every image and document source
// of the Messages request v (in a message's content, or a tool result's) that is not in its
// normal form (normalMediaType), and reports whether it did: Anthropic accepts only its listed
// types, in lower case ("image/png", "application/pdf"), and refuses "image/PNG" with a 400
// that the client would get through the gateway, where OpenAI's data: URLs, whose media type
// parseDataURL normalises, are served. The request's bytes are otherwise copied as they came.
//
// It costs a request one look-up for "media_type" in its messages, and a look at each such
// value (mayNeedNormalMediaType); the messages are walked and copied only when a value is not
// lower-case, or when the body's \u escapes could spell one.
func NormalizeMediaTypes(v *jsonview.View, edits *jsonview.Edits) bool {
	body, changed := v.Body(), false
	for _, m := range v.Members() {
		if string(m.Key) != "messages" {
			continue
		}
		raw := body[m.Start:m.End]
		if !mayNeedNormalMediaType(raw, v.UnicodeEscapes() > 0) {
			continue
		}
		if value, ok := normalMediaTypes(raw); ok {
			edits.Replace(m, value)
			changed = true
		}
	}
	return changed
}

// mayNeedNormalMediaType reports whether the messages raw may hold a media type that is not in
// its normal form: a string after a "media_type" key that holds an upper-case letter, a
// semicolon, white space or an escape, or any \u escape when the body has some (an escaped
// key).
func mayNeedNormalMediaType(raw []byte, escaped bool) bool {
	if escaped && bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	for i := 0; ; {
		k := bytes.Index(raw[i:], mediaTypeKey)
		if k < 0 {
			return false
		}
		i += k + len(mediaTypeKey)
		j := jsonview.SkipSpace(raw, i)
		if j >= len(raw) || raw[j] != ':' {
			continue // a value, not a key
		}
		j = jsonview.SkipSpace(raw, j+1)
		if j >= len(raw) || raw[j] != '"' {
			continue
		}
		end, ok := jsonview.SkipString(raw, j)
		if !ok {
			return false
		}
		if value := raw[j+1 : end-1]; !normal(string(value)) || bytes.IndexByte(value, '\\') >= 0 {
			return true
		}
		i = end
	}
}

// span is a part of the messages' bytes to replace: [start, end) with with.
type span struct {
	start, end int
	with       []byte
}

// normalMediaTypes is the messages raw with the media types of their image and document
// sources in normal form, and whether any was not.
func normalMediaTypes(raw []byte) ([]byte, bool) {
	var spans []span
	elementsAt(raw, 0, len(raw), func(start, end int) {
		membersAt(raw, start, end, func(m jsonview.Member) {
			if string(m.Key) == "content" {
				spans = contentMediaTypes(raw, m.Start, m.End, spans)
			}
		})
	})
	if len(spans) == 0 {
		return nil, false
	}
	out := make([]byte, 0, len(raw)+16)
	at := 0
	for _, s := range spans {
		out = append(append(out, raw[at:s.start]...), s.with...)
		at = s.end
	}
	return append(out, raw[at:]...), true
}

// contentMediaTypes adds to spans the media types to normalise in the content blocks at
// raw[start:end] (a string content has none): an image's or a document's source's, and those
// in a tool result's content.
func contentMediaTypes(raw []byte, start, end int, spans []span) []span {
	elementsAt(raw, start, end, func(start, end int) {
		var kind []byte
		var source, content jsonview.Member
		membersAt(raw, start, end, func(m jsonview.Member) {
			switch string(m.Key) {
			case "type":
				kind = raw[m.Start:m.End]
			case "source":
				source = m
			case "content":
				content = m
			}
		})
		switch string(kind) {
		case `"image"`, `"document"`:
			if source.End > 0 {
				spans = sourceMediaType(raw, source, spans)
			}
		case `"tool_result"`:
			if content.End > 0 {
				spans = contentMediaTypes(raw, content.Start, content.End, spans)
			}
		}
	})
	return spans
}

// sourceMediaType adds to spans the media_type of the source object m, when it is a string
// not in normal form.
func sourceMediaType(raw []byte, m jsonview.Member, spans []span) []span {
	membersAt(raw, m.Start, m.End, func(f jsonview.Member) {
		value := raw[f.Start:f.End]
		if string(f.Key) != "media_type" || len(value) < 2 || value[0] != '"' {
			return
		}
		text := string(jsonview.Unquote(value))
		if normal := normalMediaType(text); normal != text || bytes.IndexByte(value, '\\') >= 0 {
			spans = append(spans, span{start: f.Start, end: f.End, with: jsontext.AppendString(nil, normal)})
		}
	})
	return spans
}

// elementsAt calls fn with the bounds of each element of the array at raw[start:end] (after
// white space); anything else has none.
func elementsAt(raw []byte, start, end int, fn func(start, end int)) {
	b := raw[:end]
	i := jsonview.SkipSpace(b, start)
	if i >= len(b) || b[i] != '[' {
		return
	}
	for i = jsonview.SkipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		e, ok := jsonview.SkipValue(b, i)
		if !ok {
			return
		}
		fn(i, e)
		if i = jsonview.SkipSpace(b, e); i < len(b) && b[i] == ',' {
			i = jsonview.SkipSpace(b, i+1)
		}
	}
}

// membersAt calls fn with each member of the object at raw[start:end], its offsets in raw;
// anything else has none.
func membersAt(raw []byte, start, end int, fn func(jsonview.Member)) {
	_ = jsonview.EachMember(raw[start:end], func(m jsonview.Member) error {
		m.KeyStart, m.Start, m.End = m.KeyStart+start, m.Start+start, m.End+start
		fn(m)
		return nil
	})
}
