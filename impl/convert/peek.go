package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/llm"
)

// errSyntax is the 400 for a body whose top level is not a JSON object.
var errSyntax = apierror.Invalid("", "We could not parse the JSON body of your request: the body must be a JSON object.")

// maxTokensKeys are, per format, the top-level fields that bound the output, the one that
// wins last.
var maxTokensKeys = map[llm.Format][]string{
	llm.FormatChat:      {"max_tokens", "max_completion_tokens"},
	llm.FormatResponses: {"max_output_tokens"},
	llm.FormatMessages:  {"max_tokens"},
}

// Peek is what PeekRequest reads from the top level of a request body.
type Peek struct {
	Model  string
	Stream bool
	// MaxTokens is the output bound (chat max_completion_tokens, else max_tokens; Responses
	// max_output_tokens; Messages max_tokens); 0 when absent.
	MaxTokens int
	// Choices is how many answers a chat request asks for (n); 1 when absent, and always 1 in
	// the other formats.
	Choices int
}

// PeekRequest peeks at a request body of format f without decoding it: the top-level model,
// stream, output bound and number of choices. It scans the top-level members and skips every
// other value without building it, so its cost is one pass over the bytes with no allocation
// in the common case. It checks only the top level; DecodeRequest checks the rest. A missing
// or non-string model, or a stream, bound or n of the wrong type, is a 400 *apierror.Error
// naming the field; when a key repeats, the last one counts, as with encoding/json.
func PeekRequest(f llm.Format, body []byte) (Peek, error) {
	bounds, ok := maxTokensKeys[f]
	if !ok {
		return Peek{}, errors.New("convert: unknown format " + string(f))
	}
	p := Peek{Choices: 1}
	haveModel := false
	bound := [2]int{-1, -1}
	err := scanTop(body, func(key []byte, v []byte) error {
		switch {
		case string(key) == "model":
			if v[0] != '"' {
				return apierror.Invalid("model", "Invalid type for 'model': expected a string.")
			}
			p.Model, haveModel = unquote(v), true
		case string(key) == "stream":
			switch string(v) {
			case "true":
				p.Stream = true
			case "false", "null":
				p.Stream = false
			default:
				return apierror.Invalid("stream", "Invalid type for 'stream': expected a boolean.")
			}
		case string(key) == "n" && f == llm.FormatChat:
			if string(v) == "null" {
				p.Choices = 1
				return nil
			}
			n, err := parseInt(v, "n")
			if err != nil {
				return err
			}
			p.Choices = max(n, 1)
		default:
			for i, k := range bounds {
				if string(key) != k {
					continue
				}
				if string(v) == "null" {
					bound[i] = -1
					return nil
				}
				n, err := parseInt(v, k)
				if err != nil {
					return err
				}
				bound[i] = n
			}
		}
		return nil
	})
	if err != nil {
		return Peek{}, err
	}
	if !haveModel {
		return Peek{}, apierror.Invalid("model", "you must provide a model parameter")
	}
	for _, b := range bound {
		if b >= 0 {
			p.MaxTokens = b
		}
	}
	return p, nil
}

// SetMemberModel appends body to dst with the "model" of the object in its top-level member
// rewritten to model, as SetModel does to a whole body (a Messages message_start event's
// message, a Responses event's response), every other byte as it was. A body without that
// member, or whose member is not an object, is appended unchanged.
func SetMemberModel(dst, body []byte, member, model string) ([]byte, error) {
	start, end := -1, -1
	err := scanTopSpans(body, func(key []byte, s, e int) error {
		if string(key) == member {
			start, end = s, e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if start < 0 || body[start] != '{' {
		return append(dst, body...), nil
	}
	dst = append(dst, body[:start]...)
	if dst, err = SetModel(dst, body[start:end], model); err != nil {
		return nil, err
	}
	return append(dst, body[end:]...), nil
}

// SetModel appends body to dst with its top-level "model" rewritten to model (every
// occurrence, when the key repeats), leaving every other byte as it was; when the body has no
// top-level model, one is added as its first member. Nested "model" keys are not touched.
func SetModel(dst, body []byte, model string) ([]byte, error) {
	return ForUpstream(dst, body, model, UpstreamEdits{})
}

// unquote returns the string a JSON string token denotes.
func unquote(tok []byte) string {
	if bytes.IndexByte(tok, '\\') < 0 {
		return string(tok[1 : len(tok)-1])
	}
	s, _ := jsontext.AppendUnquoted(nil, tok[1:len(tok)-1]) // the token was scanned as a valid string
	return string(s)
}

// scanTop calls fn for each member of the top-level object of body with its key (unescaped)
// and its value's bytes.
func scanTop(body []byte, fn func(key, value []byte) error) error {
	return scanTopSpans(body, func(key []byte, start, end int) error { return fn(key, body[start:end]) })
}

// scanTopSpans calls fn for each member of the top-level object of body with its key
// (unescaped) and the offsets of its value. It checks the object's own syntax and the nesting
// of brackets; what is inside strings and nested values is left to encoding/json.
func scanTopSpans(body []byte, fn func(key []byte, start, end int) error) error {
	return scanTopMembers(body, func(_ int, key []byte, start, end int) error { return fn(key, start, end) })
}

// scanTopMembers is scanTopSpans that also gives the offset of each member's key (its opening
// quote), for rewrites that copy or leave out whole members.
func scanTopMembers(body []byte, fn func(keyStart int, key []byte, start, end int) error) error {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return errSyntax
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		if skipSpace(body, i+1) != len(body) {
			return errSyntax
		}
		return nil
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return errSyntax
		}
		ks := i
		ke, ok := skipString(body, i)
		if !ok {
			return errSyntax
		}
		key := body[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(unquote(body[i:ke]))
		}
		i = skipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return errSyntax
		}
		vs := skipSpace(body, i+1)
		ve, ok := skipValue(body, vs)
		if !ok {
			return errSyntax
		}
		if err := fn(ks, key, vs, ve); err != nil {
			return err
		}
		i = skipSpace(body, ve)
		if i >= len(body) {
			return errSyntax
		}
		switch body[i] {
		case ',':
			i = skipSpace(body, i+1)
		case '}':
			if skipSpace(body, i+1) != len(body) {
				return errSyntax
			}
			return nil
		default:
			return errSyntax
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset after the string starting at b[i] == '"'. It jumps from quote
// to quote (bytes.IndexByte is vectorised) and does not check the string's content.
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		escapes := 0
		for m := j - 1; m > i && b[m] == '\\'; m-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// skipValue returns the offset after the value starting at b[i]. Nested values are skipped by
// matching brackets outside strings; their inner syntax is not checked.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		var buf [64]byte
		stack := buf[:0]
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				stack = append(stack, b[j])
			case '}', ']':
				if len(stack) == 0 || (b[j] == '}') != (stack[len(stack)-1] == '{') {
					return 0, false
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
			j++
		}
		if _, err := strconv.ParseFloat(string(b[i:j]), 64); err != nil {
			return 0, false
		}
		return j, true
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// IncludeUsage reports a chat request's stream_options.include_usage, scanning only the top
// level and decoding only that member.
func IncludeUsage(body []byte) bool {
	asked := false
	_ = scanTop(body, func(key, value []byte) error {
		if string(key) == "stream_options" {
			asked, _, _ = streamOptions(value)
		}
		return nil
	})
	return asked
}

// streamOptions reads a stream_options value: whether it asks for usage, and its members.
func streamOptions(value []byte) (includeUsage bool, members map[string]json.RawMessage, err error) {
	members = map[string]json.RawMessage{}
	if isNull(value) {
		return false, members, nil
	}
	if err := json.Unmarshal(value, &members); err != nil {
		return false, nil, apierror.Invalid("stream_options", "Invalid type for 'stream_options': expected an object.")
	}
	var b bool
	_ = json.Unmarshal(members["include_usage"], &b)
	return b, members, nil
}

// UpstreamEdits are the rewrites ForUpstream makes besides the model.
type UpstreamEdits struct {
	// IncludeUsage sets stream_options.include_usage to true: a streamed chat request, which
	// the gateway must meter.
	IncludeUsage bool
	// NoStore sets store to false: a Responses request, whose answer the upstream must not keep
	// where any tenant's later request could reach it (see SharedStateFields).
	NoStore bool
	// MinBound, when positive, raises a top-level BoundKey below it to MinBound: the output
	// bound of an upstream that refuses smaller ones (the Responses API's max_output_tokens
	// starts at 16). DefaultBound, when positive, is the BoundKey set where the body has none
	// (or null): the model's limit, which the upstream must not exceed when the client gave no
	// bound.
	BoundKey     string
	MinBound     int
	DefaultBound int
	// MaxBound, when positive, lowers every top-level output bound of the body above it to
	// MaxBound (in ClampKeys; see BoundKeys): the clamp of a bound beyond what the model or
	// expert can produce. MinBound wins over it.
	MaxBound  int
	ClampKeys []string
}

// BoundKeys are the top-level fields of a request of format f that bound its output.
func BoundKeys(f llm.Format) []string { return maxTokensKeys[f] }

// ForUpstream appends to dst a request body rewritten for an upstream of the same format, in
// one pass: every top-level "model" becomes model, and the fields of ed are set. Every other
// byte stays as the client sent it, copied once, with no intermediate buffer in the common case
// (no stream_options to rewrite).
func ForUpstream(dst, body []byte, model string, ed UpstreamEdits) ([]byte, error) {
	type edit struct {
		start, end int
		with       []byte // nil: the quoted model
	}
	var (
		quoted    = jsontext.AppendString(make([]byte, 0, 64), model)
		editsBuf  [5]edit
		edits     = editsBuf[:0]
		haveModel bool
		haveOpts  bool
		haveStore bool
		haveBound bool
	)
	err := scanTopSpans(body, func(key []byte, start, end int) error {
		switch {
		case string(key) == "model":
			haveModel = true
			edits = append(edits, edit{start, end, nil})
		case string(key) == "stream_options" && ed.IncludeUsage:
			haveOpts = true
			_, members, err := streamOptions(body[start:end])
			if err != nil {
				return err
			}
			members["include_usage"] = json.RawMessage("true")
			b, err := json.Marshal(members)
			if err != nil {
				return err
			}
			edits = append(edits, edit{start, end, b})
		case string(key) == "store" && ed.NoStore:
			haveStore = true
			edits = append(edits, edit{start, end, []byte("false")})
		case ed.MaxBound > 0 && string(key) != ed.BoundKey && slices.Contains(ed.ClampKeys, string(key)):
			if string(body[start:end]) == "null" {
				return nil
			}
			n, err := parseInt(body[start:end], string(key))
			if err != nil {
				return err
			}
			if n > ed.MaxBound {
				edits = append(edits, edit{start, end, strconv.AppendInt(nil, int64(ed.MaxBound), 10)})
			}
		case ed.BoundKey != "" && string(key) == ed.BoundKey:
			if string(body[start:end]) == "null" {
				if ed.DefaultBound > 0 {
					haveBound = true
					edits = append(edits, edit{start, end, strconv.AppendInt(nil, int64(ed.DefaultBound), 10)})
				}
				return nil
			}
			haveBound = true
			n, err := parseInt(body[start:end], ed.BoundKey)
			if err != nil {
				return err
			}
			switch {
			case n < ed.MinBound:
				edits = append(edits, edit{start, end, strconv.AppendInt(nil, int64(ed.MinBound), 10)})
			case ed.MaxBound > 0 && n > max(ed.MaxBound, ed.MinBound) && slices.Contains(ed.ClampKeys, ed.BoundKey):
				edits = append(edits, edit{start, end, strconv.AppendInt(nil, int64(max(ed.MaxBound, ed.MinBound)), 10)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dst = slices.Grow(dst, len(body)+len(edits)*len(quoted)+len(quoted)+64)
	prev := 0
	addOpts, addStore := ed.IncludeUsage && !haveOpts, ed.NoStore && !haveStore
	addBound := ed.DefaultBound > 0 && !haveBound
	if !haveModel || addOpts || addStore || addBound {
		// Added members go first: after the opening brace, separated by commas, and followed
		// by one unless the object is empty.
		open := bytes.IndexByte(body, '{')
		empty := false
		if rest := bytes.TrimLeft(body[open+1:], " \t\r\n"); len(rest) > 0 && rest[0] == '}' {
			empty = true
		}
		dst = append(dst, body[:open+1]...)
		added := 0
		add := func(member string, value []byte) {
			if added > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(dst, member...), value...)
			added++
		}
		if !haveModel {
			add(`"model":`, quoted)
		}
		if addOpts {
			add(`"stream_options":`, []byte(`{"include_usage":true}`))
		}
		if addStore {
			add(`"store":`, []byte("false"))
		}
		if addBound {
			add(`"`+ed.BoundKey+`":`, strconv.AppendInt(nil, int64(ed.DefaultBound), 10))
		}
		if !empty {
			dst = append(dst, ',')
		}
		prev = open + 1
	}
	for _, e := range edits {
		dst = append(dst, body[prev:e.start]...)
		if e.with == nil {
			dst = append(dst, quoted...)
		} else {
			dst = append(dst, e.with...)
		}
		prev = e.end
	}
	return append(dst, body[prev:]...), nil
}
