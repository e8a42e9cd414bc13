package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// DecodeRequest parses a client request body of format f into the neutral form. Source is f;
// the modelled top-level fields are decoded (and kept as sent in Raw); every other top-level
// field is kept, as sent, in Extra. What a modelled field holds that the neutral form cannot
// (cache hints, audio parts, built-in tools, ...) is listed in Unmodelled. A body that is not
// a valid request of the format gives a 400 *apierror.Error naming the field. The request's
// raw values (Raw, Extra, and the JSON it keeps of tools and schemas) are slices of body,
// which the caller must not modify while it uses the request.
func DecodeRequest(f llm.Format, body []byte) (*llm.Request, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return nil, err
	}
	return decodeRequest(f, v, decoder{})
}

// DecodeView is DecodeRequest of a request already read (its view): the top level is not
// scanned again, nor the syntax checked again when the validator checked it.
func DecodeView(f llm.Format, v *jsonview.View) (*llm.Request, error) {
	return decodeRequest(f, v, decoder{})
}

// DecodeCountTokensRequest parses the body of a Messages count_tokens request, which is a
// Messages request without max_tokens, as DecodeView parses a Messages request.
func DecodeCountTokensRequest(v *jsonview.View) (*llm.Request, error) {
	return decodeRequest(llm.FormatMessages, v, decoder{boundOptional: true})
}

// decodeRequest is DecodeView with d's options.
func decodeRequest(f llm.Format, v *jsonview.View, d decoder) (*llm.Request, error) {
	modelled, ok := modelledKeys[f]
	if !ok {
		return nil, fmt.Errorf("convert: unknown format %q", f)
	}
	top, err := topMembers(v)
	if err != nil {
		return nil, err
	}
	req := &llm.Request{Source: f}
	model, ok := top["model"]
	if !ok || isNull(model) {
		return nil, apierror.Invalid("model", "you must provide a model parameter")
	}
	if req.Model, err = parseString(model, "model"); err != nil {
		return nil, err
	}
	for k, v := range top {
		switch {
		case k == "model":
		case modelled[k]:
			if req.Raw == nil {
				req.Raw = make(map[string]json.RawMessage)
			}
			req.Raw[k] = v
		default:
			if req.Extra == nil {
				req.Extra = make(map[string]json.RawMessage)
			}
			req.Extra[k] = v
		}
	}
	d.req = req
	if err := d.fields(f, req.Raw); err != nil {
		return nil, err
	}
	return req, nil
}

// modelledKeys are, per format, the top-level fields decoded into the neutral form ("model"
// aside). Everything else goes to Extra.
var modelledKeys = map[llm.Format]map[string]bool{
	llm.FormatChat: setOf("messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
		"stop", "tools", "tool_choice", "parallel_tool_calls", "response_format", "n", "stream",
		"stream_options", "reasoning_effort", "verbosity"),
	llm.FormatResponses: setOf("instructions", "input", "max_output_tokens", "temperature", "top_p",
		"tools", "tool_choice", "parallel_tool_calls", "text", "reasoning", "stream"),
	llm.FormatMessages: setOf("system", "messages", "max_tokens", "temperature", "top_p",
		"stop_sequences", "tools", "tool_choice", "stream", "output_format", "output_config"),
}

func setOf(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// decoder decodes the modelled fields of one request.
type decoder struct {
	req    *llm.Request
	system []string
	// boundOptional accepts a Messages request without max_tokens (count_tokens).
	boundOptional bool
}

// fields decodes the modelled fields in raw (wire name to value) into d.req.
func (d *decoder) fields(f llm.Format, raw map[string]json.RawMessage) error {
	var err error
	switch f {
	case llm.FormatChat:
		err = d.chatFields(raw)
	case llm.FormatResponses:
		err = d.responsesFields(raw)
	case llm.FormatMessages:
		err = d.messagesFields(raw)
	default:
		err = fmt.Errorf("convert: unknown format %q", f)
	}
	if err != nil {
		return err
	}
	d.req.System = strings.Join(d.system, "\n\n")
	return nil
}

// note records something the neutral form does not hold. Its Name is param without indexes,
// followed by suffix (used to name a block or item by its type, e.g. ".thinking").
func (d *decoder) note(param, suffix string, advisory bool, raw json.RawMessage) {
	d.req.Unmodelled = append(d.req.Unmodelled, llm.Unmodelled{
		Param:    param,
		Name:     genericPath(param) + suffix,
		Advisory: advisory,
		Size:     len(raw),
	})
}

// noteKeys records every key of m that is not in known as an advisory unmodelled field, and
// ignores the keys in structural (bookkeeping such as item ids that no other format needs).
func (d *decoder) noteKeys(param string, m jsonObject, known, structural map[string]bool) {
	for _, kv := range m {
		if known[string(kv.key)] || structural[string(kv.key)] || isNull(kv.value) {
			continue
		}
		d.note(param+"."+string(kv.key), "", true, kv.value)
	}
}

// genericPath removes the indexes from a wire path: "messages[2].content[0]" becomes
// "messages[].content[]".
func genericPath(p string) string {
	if !strings.Contains(p, "[") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		b.WriteByte(p[i])
		if p[i] == '[' {
			for i+1 < len(p) && p[i+1] != ']' {
				i++
			}
		}
	}
	return b.String()
}

func idx(param string, i int) string { return param + "[" + strconv.Itoa(i) + "]" }

// topMembers checks the body of v is valid JSON (unless the validator did: the scans of the
// decoders rely on it) and maps its top-level members by name (the last one, when a name
// repeats). The values are slices of the body, not of a copy: a request body is never written
// once read, and a copy of it (up to 32 MiB) would live as long as the request, beside the body
// itself.
func topMembers(v *jsonview.View) (map[string]json.RawMessage, error) {
	body := v.Body()
	if !v.Valid() && !json.Valid(body) {
		return nil, errSyntax
	}
	ms := v.Members()
	top := make(map[string]json.RawMessage, len(ms))
	for _, m := range ms {
		top[string(m.Key)] = body[m.Start:m.End:m.End]
	}
	return top, nil
}

// jsonMember is one member of a JSON object being decoded.
type jsonMember struct {
	key   []byte
	value json.RawMessage
}

// jsonObject is a JSON object's members in wire order, found by scanning without building
// anything; objects are small, so a lookup is a linear search.
type jsonObject []jsonMember

// get returns the value of the member key (the last one, when the key repeats, as
// encoding/json does), or nil.
func (o jsonObject) get(key string) json.RawMessage {
	for i := len(o) - 1; i >= 0; i-- {
		if string(o[i].key) == key {
			return o[i].value
		}
	}
	return nil
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// firstByte is the first non-space byte of raw (0 if none).
func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

func typeError(param, want string) error {
	return apierror.Invalid(param, "Invalid type for '%s': expected %s.", param, want)
}

func parseObject(raw json.RawMessage, param string) (jsonObject, error) {
	if firstByte(raw) != '{' {
		return nil, typeError(param, "an object")
	}
	o := make(jsonObject, 0, 4)
	err := scanTopSpans(raw, func(key []byte, start, end int) error {
		o = append(o, jsonMember{key, raw[start:end:end]})
		return nil
	})
	if err != nil {
		return nil, typeError(param, "an object")
	}
	return o, nil
}

func parseArray(raw json.RawMessage, param string) ([]json.RawMessage, error) {
	a, ok := scanArray(raw)
	if !ok {
		return nil, typeError(param, "an array")
	}
	return a, nil
}

// scanArray splits a JSON array into its elements.
func scanArray(b []byte) ([]json.RawMessage, bool) {
	i := jsonview.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	i = jsonview.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return out, jsonview.SkipSpace(b, i+1) == len(b)
	}
	for {
		end, ok := jsonview.SkipValue(b, i)
		if !ok {
			return nil, false
		}
		out = append(out, b[i:end:end])
		i = jsonview.SkipSpace(b, end)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = jsonview.SkipSpace(b, i+1)
		case ']':
			return out, jsonview.SkipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

func parseString(raw json.RawMessage, param string) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' {
		return "", typeError(param, "a string")
	}
	if bytes.IndexByte(t, '\\') < 0 {
		return string(t[1 : len(t)-1]), nil
	}
	var s string
	if json.Unmarshal(t, &s) != nil {
		return "", typeError(param, "a string")
	}
	return s, nil
}

// optString parses a string that may be absent or null.
func optString(raw json.RawMessage, param string) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	return parseString(raw, param)
}

func parseBool(raw json.RawMessage, param string) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, typeError(param, "a boolean")
}

// parseInt parses a non-negative integer (an integral float such as 100.0 is accepted).
func parseInt(raw json.RawMessage, param string) (int, error) {
	t := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		// 16.0 is an integer; so is a literal too large for int64, which counts as the
		// largest bound (an output bound beyond a model's limit is clamped, not refused).
		f, ferr := strconv.ParseFloat(t, 64)
		if ferr != nil || f != math.Trunc(f) {
			return 0, typeError(param, "an integer")
		}
		if f < 0 {
			return 0, apierror.Invalid(param, "Invalid '%s': expected a value >= 0, but got %s instead.", param, bytes.TrimSpace(raw))
		}
		n = int64(min(f, math.MaxInt32))
	}
	if n < 0 {
		return 0, apierror.Invalid(param, "Invalid '%s': expected a value >= 0, but got %d instead.", param, n)
	}
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return int(n), nil
}

func parseFloat(raw json.RawMessage, param string) (*float64, error) {
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil {
		return nil, typeError(param, "a number")
	}
	return &f, nil
}

// parseStop parses a stop value: a string or an array of strings.
func parseStop(raw json.RawMessage, param string) ([]string, error) {
	if firstByte(raw) == '"' {
		s, err := parseString(raw, param)
		return []string{s}, err
	}
	a, err := parseArray(raw, param)
	if err != nil {
		return nil, typeError(param, "a string or an array of strings")
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, err := parseString(e, idx(param, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// parseSchema keeps a JSON Schema value (nil when absent or null); it must be an object.
func parseSchema(raw json.RawMessage, param string) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	if firstByte(raw) != '{' {
		return nil, typeError(param, "an object")
	}
	return raw, nil
}

func optBoolPtr(raw json.RawMessage, param string) (*bool, error) {
	if isNull(raw) {
		return nil, nil
	}
	b, err := parseBool(raw, param)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// parseDataURL splits a base64 data: URL into its media type and data. The media type is
// read as RFC 2045 reads it, its case aside and without its parameters
// ("Application/PDF;name=x.pdf" is application/pdf: normalMediaType), and so is the base64
// marker.
func parseDataURL(u string) (mediaType, data string, ok bool) {
	if !strings.HasPrefix(u, "data:") {
		return "", "", false
	}
	comma := strings.IndexByte(u, ',')
	if comma < 0 {
		return "", "", false
	}
	header := u[len("data:"):comma]
	semi := strings.LastIndexByte(header, ';')
	if semi < 0 || !strings.EqualFold(header[semi+1:], "base64") {
		return "", "", false
	}
	return normalMediaType(header[:semi]), u[comma+1:], true
}

// imagePart builds an image part from a URL (a base64 data: URL is split into its parts).
func imagePart(url, detail, path string) llm.Part {
	p := llm.Part{Kind: llm.PartImage, Detail: detail, Path: path}
	if mt, data, ok := parseDataURL(url); ok {
		p.MediaType, p.Data = mt, data
	} else {
		p.ImageURL = url
	}
	return p
}

// documentPart builds a document part from an inline base64 data: URL (file_data of the
// OpenAI formats, at param). OpenAI refuses anything else there, bare base64 among it ("Expected
// a base64-encoded data URL with an application/pdf MIME type"), and so does this with a 400
// naming param.
func documentPart(fileData, filename, path, param string) (llm.Part, error) {
	mt, data, ok := parseDataURL(fileData)
	if !ok || mt == "" {
		what := "a value without the 'data:' prefix"
		if strings.HasPrefix(fileData, "data:") {
			what = "a data URL that is not base64-encoded or names no MIME type"
		}
		return llm.Part{}, apierror.Invalid(param, "Invalid file data: '%s'. Expected a base64-encoded data URL with a MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got %s.", param, what)
	}
	return llm.Part{Kind: llm.PartDocument, MediaType: mt, Data: data, Filename: filename, Path: path}, nil
}

// documentDataURL is the data: URL form of a document part (file_data of the OpenAI formats).
func documentDataURL(p llm.Part) string {
	return "data:" + p.MediaType + ";base64," + p.Data
}

// imageURL is the URL form of an image part (inline data as a data: URL).
func imageURL(p llm.Part) string {
	if p.ImageURL != "" {
		return p.ImageURL
	}
	return "data:" + p.MediaType + ";base64," + p.Data
}

// objectKind returns the "type" member of a content part or item ("" when absent).
func objectKind(m jsonObject, param string) (string, error) {
	return optString(m.get("type"), param+".type")
}
