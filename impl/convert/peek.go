package convert

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/jsonview"
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

// ReadRequest reads the top level of a request body, for a caller that has only the bytes (the
// gateway's edge gets the view from the validator's pass): the 400 for a body whose top level is
// not a JSON object.
func ReadRequest(body []byte) (*jsonview.View, error) {
	v, err := jsonview.Parse(body)
	if err != nil {
		return nil, errSyntax
	}
	return v, nil
}

// PeekRequest reads, from the view of a request of format f, the top-level model, stream,
// output bound and number of choices: a look-up among the members, no scan of the bytes. It
// checks only those members; DecodeRequest checks the rest. A missing or non-string model, or a
// stream, bound or n of the wrong type, is a 400 *apierror.Error naming the field; when a key
// repeats, the last one counts, as with encoding/json.
func PeekRequest(f llm.Format, v *jsonview.View) (Peek, error) {
	bounds, ok := maxTokensKeys[f]
	if !ok {
		return Peek{}, errors.New("convert: unknown format " + string(f))
	}
	p := Peek{Choices: 1}
	haveModel := false
	bound := [2]int{-1, -1}
	body := v.Body()
	for _, m := range v.Members() {
		key, val := m.Key, body[m.Start:m.End]
		switch {
		case string(key) == "model":
			if val[0] != '"' {
				return Peek{}, apierror.Invalid("model", "Invalid type for 'model': expected a string.")
			}
			p.Model, haveModel = unquote(val), true
		case string(key) == "stream":
			switch string(val) {
			case "true":
				p.Stream = true
			case "false", "null":
				p.Stream = false
			default:
				return Peek{}, apierror.Invalid("stream", "Invalid type for 'stream': expected a boolean.")
			}
		case string(key) == "n" && f == llm.FormatChat:
			if string(val) == "null" {
				p.Choices = 1
				continue
			}
			n, err := parseInt(val, "n")
			if err != nil {
				return Peek{}, err
			}
			p.Choices = max(n, 1)
		default:
			for i, k := range bounds {
				if string(key) != k {
					continue
				}
				if string(val) == "null" {
					bound[i] = -1
					continue
				}
				n, err := parseInt(val, k)
				if err != nil {
					return Peek{}, err
				}
				bound[i] = n
			}
		}
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
	return QuoteModel(model).SetMember(dst, body, member)
}

// SetModel appends body to dst with its top-level "model" rewritten to model (every
// occurrence, when the key repeats), leaving every other byte as it was; when the body has no
// top-level model, one is added as its first member. Nested "model" keys are not touched.
func SetModel(dst, body []byte, model string) ([]byte, error) {
	return QuoteModel(model).Set(dst, body)
}

// SetModelOf is SetModel of an object already read into v.
func SetModelOf(dst []byte, v *jsonview.View, model string) []byte {
	return QuoteModel(model).SetOf(dst, v)
}

// QuotedModel is a model id quoted once as a JSON string, for a caller that rewrites many
// bodies to the same model (a relayed stream, each of whose events SetModel would quote it for,
// one allocation an event).
type QuotedModel []byte

// QuoteModel quotes model as a JSON string.
func QuoteModel(model string) QuotedModel { return jsontext.AppendString(nil, model) }

// Set is SetModel to the model q quotes.
func (q QuotedModel) Set(dst, body []byte) ([]byte, error) {
	var v jsonview.View
	if err := v.Parse(body); err != nil {
		return nil, errSyntax
	}
	return q.SetOf(dst, &v), nil
}

// SetOf is SetModelOf to the model q quotes.
func (q QuotedModel) SetOf(dst []byte, v *jsonview.View) []byte {
	var edits jsonview.Edits
	setModel(v, &edits, q)
	return edits.AppendTo(dst, v)
}

// SetMember is SetMemberModel to the model q quotes.
func (q QuotedModel) SetMember(dst, body []byte, member string) ([]byte, error) {
	var v jsonview.View
	if err := v.Parse(body); err != nil {
		return nil, errSyntax
	}
	m, ok := v.Lookup(member)
	if !ok || body[m.Start] != '{' {
		return append(dst, body...), nil
	}
	dst = append(dst, body[:m.Start]...)
	dst, err := q.Set(dst, body[m.Start:m.End])
	if err != nil {
		return nil, err
	}
	return append(dst, body[m.End:]...), nil
}

// setModel rewrites every top-level "model" of v to the quoted model, or adds one.
func setModel(v *jsonview.View, edits *jsonview.Edits, quoted []byte) {
	have := false
	for _, m := range v.Members() {
		if string(m.Key) == "model" {
			edits.Replace(m, quoted)
			have = true
		}
	}
	if !have {
		edits.Add("model", quoted)
	}
}

// unquote returns the string a JSON string token denotes.
func unquote(tok []byte) string { return string(jsonview.Unquote(tok)) }

// scanTop calls fn for each member of the top-level object of body with its key (unescaped)
// and its value's bytes; a body that is not an object is errSyntax.
func scanTop(body []byte, fn func(key, value []byte) error) error {
	return scanTopSpans(body, func(key []byte, start, end int) error { return fn(key, body[start:end]) })
}

// eachTop calls fn for each top-level member of v with its key (unescaped) and its value's
// bytes, in order, as scanTop does for the bytes v was read from.
func eachTop(v *jsonview.View, fn func(key, value []byte) error) error {
	for _, m := range v.Members() {
		if err := fn(m.Key, v.ValueOf(m)); err != nil {
			return err
		}
	}
	return nil
}

// scanTopSpans calls fn for each member of the top-level object of body with its key
// (unescaped) and the offsets of its value (see jsonview.EachMember).
func scanTopSpans(body []byte, fn func(key []byte, start, end int) error) error {
	err := jsonview.EachMember(body, func(m jsonview.Member) error { return fn(m.Key, m.Start, m.End) })
	if errors.Is(err, jsonview.ErrNotObject) {
		return errSyntax
	}
	return err
}

// IncludeUsage reports a chat request's stream_options.include_usage, decoding only that member.
func IncludeUsage(v *jsonview.View) bool {
	value, ok := v.Value("stream_options")
	if !ok {
		return false
	}
	asked, _, _ := streamOptions(value)
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
	// where any tenant's later request could reach it, or a chat request that asked for its
	// completion to be stored (see SharedStateFields). A body without store gets store: false
	// added, which a Responses request needs (the API stores by default) and a chat request
	// does not (it does not store unless asked): NoStore is set for a chat request only when
	// its store is set.
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
	// EndUser, when set, puts the account's identifiers in place of the end-user identifiers
	// of the request, of format Client (chat and Responses safety_identifier and user,
	// Messages metadata.user_id); nil leaves them as the client sent them. AddEndUser also
	// adds the account's own to a request that names none (end_user_ids namespaced_always):
	// unset, a request gains no field its client did not send.
	EndUser    *EndUser
	AddEndUser bool
	Client     llm.Format
}

// BoundKeys are the top-level fields of a request of format f that bound its output.
func BoundKeys(f llm.Format) []string { return maxTokensKeys[f] }

// ForUpstream appends to dst the request of view v rewritten for an upstream of the same
// format: every top-level "model" becomes model, and the fields of ed are set (the end-user
// identifiers among them, in the same pass over the members), together with the edits already
// made (the hosted tools' plan, a lowered thinking budget), in one copy. Every other byte stays
// as the client sent it.
func ForUpstream(dst []byte, v *jsonview.View, model string, ed UpstreamEdits, edits *jsonview.Edits) ([]byte, error) {
	var quotedBuf [64]byte
	quoted := jsontext.AppendString(quotedBuf[:0], model)
	body := v.Body()
	setModel(v, edits, quoted)
	haveOpts, haveStore, haveBound, haveEndUser := false, false, false, false
	for _, m := range v.Members() {
		key, value := m.Key, body[m.Start:m.End]
		switch {
		case ed.EndUser != nil && ed.EndUser.edit(ed.Client, m, value, ed.AddEndUser, edits):
			haveEndUser = true
		case string(key) == "stream_options" && ed.IncludeUsage:
			haveOpts = true
			_, members, err := streamOptions(value)
			if err != nil {
				return nil, err
			}
			members["include_usage"] = json.RawMessage("true")
			b, err := json.Marshal(members)
			if err != nil {
				return nil, err
			}
			edits.Replace(m, b)
		case string(key) == "store" && ed.NoStore:
			haveStore = true
			edits.Replace(m, []byte("false"))
		case ed.MaxBound > 0 && string(key) != ed.BoundKey && slices.Contains(ed.ClampKeys, string(key)):
			if string(value) == "null" {
				continue
			}
			n, err := parseInt(value, string(key))
			if err != nil {
				return nil, err
			}
			if n > ed.MaxBound {
				edits.Replace(m, strconv.AppendInt(nil, int64(ed.MaxBound), 10))
			}
		case ed.BoundKey != "" && string(key) == ed.BoundKey:
			if string(value) == "null" {
				if ed.DefaultBound > 0 {
					haveBound = true
					edits.Replace(m, strconv.AppendInt(nil, int64(ed.DefaultBound), 10))
				}
				continue
			}
			haveBound = true
			n, err := parseInt(value, ed.BoundKey)
			if err != nil {
				return nil, err
			}
			switch {
			case n < ed.MinBound:
				edits.Replace(m, strconv.AppendInt(nil, int64(ed.MinBound), 10))
			case ed.MaxBound > 0 && n > max(ed.MaxBound, ed.MinBound) && slices.Contains(ed.ClampKeys, ed.BoundKey):
				edits.Replace(m, strconv.AppendInt(nil, int64(max(ed.MaxBound, ed.MinBound)), 10))
			}
		}
	}
	if ed.IncludeUsage && !haveOpts {
		edits.Add("stream_options", []byte(`{"include_usage":true}`))
	}
	if ed.NoStore && !haveStore {
		edits.Add("store", []byte("false"))
	}
	if ed.DefaultBound > 0 && !haveBound {
		edits.Add(ed.BoundKey, strconv.AppendInt(nil, int64(ed.DefaultBound), 10))
	}
	if ed.EndUser != nil && ed.AddEndUser && !haveEndUser {
		ed.EndUser.addAccount(ed.Client, edits)
	}
	return edits.AppendTo(dst, v), nil
}
