package convert

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// End-user identifiers: a client names the end user a request serves in OpenAI's
// safety_identifier or its deprecated user (chat, Responses), or in Anthropic's
// metadata.user_id (Messages). Every account reaches a provider through the operator's one
// upstream account, so the gateway sends in their place identifiers it makes per account
// (impl/enduserid), or the client's values as they are where the operator says so.

// EndUser is what a request's end-user identifiers become on their way upstream, for one
// account: ForUpstream puts them in place of the client's in the same copy as its other edits.
// The gateway makes one per account and keeps it; nothing here allocates for a request that
// names no end user.
type EndUser struct {
	// ID is the account's own identifier.
	ID string
	// Account is the JSON string of the account's own identifier, sent for a request that
	// names no end user.
	Account []byte
	// Metadata is a Messages metadata object whose user_id is Account.
	Metadata []byte
	// AppendUser appends to dst the identifier (unquoted, needing no escape) of the end user
	// whose value, as the client sent it (unescaped), is raw.
	AppendUser func(dst, raw []byte) []byte
}

// NewEndUser is the EndUser of an account whose own identifier is account (of characters
// that need no escape in JSON) and whose end users' identifiers appendUser makes.
func NewEndUser(account string, appendUser func(dst, raw []byte) []byte) *EndUser {
	quoted := `"` + account + `"`
	return &EndUser{ID: account, Account: []byte(quoted), Metadata: []byte(`{"user_id":` + quoted + `}`), AppendUser: appendUser}
}

// identifier is the JSON string sent in place of a client's end-user value (a member's
// value as sent): the account's for null or "", else the end user's.
func (e *EndUser) identifier(value []byte) []byte {
	raw := value
	if len(value) >= 2 && value[0] == '"' {
		raw = jsonview.Unquote(value)
	} else if isNull(value) {
		raw = nil
	}
	if len(raw) == 0 {
		return e.Account
	}
	out := append(make([]byte, 0, len(e.Account)+30), '"')
	out = e.AppendUser(out, raw)
	return append(out, '"')
}

// messagesMetadata is a Messages metadata value with its user_id put in place, or added when
// add is set; nil when it is to stay as it came (no user_id, and add unset).
func (e *EndUser) messagesMetadata(value []byte, add bool) []byte {
	var v jsonview.View
	if isNull(value) || value[0] != '{' || v.Parse(value) != nil {
		if !add {
			return nil
		}
		return e.Metadata
	}
	var edits jsonview.Edits
	found := false
	for _, m := range v.Members() {
		if string(m.Key) == "user_id" {
			edits.Replace(m, e.identifier(v.ValueOf(m)))
			found = true
		}
	}
	if !found {
		if !add {
			return nil
		}
		edits.Add("user_id", e.Account)
	}
	return edits.AppendTo(nil, &v)
}

// edit puts e's identifiers in place of those of member m of a request of format f, and
// reports whether m is one; add also gives a Messages metadata without a user_id the
// account's.
func (e *EndUser) edit(f llm.Format, m jsonview.Member, value []byte, add bool, edits *jsonview.Edits) bool {
	switch {
	case f == llm.FormatMessages && string(m.Key) == "metadata":
		if md := e.messagesMetadata(value, add); md != nil {
			edits.Replace(m, md)
		}
	case f != llm.FormatMessages && (string(m.Key) == "safety_identifier" || string(m.Key) == "user"):
		edits.Replace(m, e.identifier(value))
	default:
		return false
	}
	return true
}

// addAccount adds the account's identifier to a request of format f that names no end user.
func (e *EndUser) addAccount(f llm.Format, edits *jsonview.Edits) {
	if f == llm.FormatMessages {
		edits.Add("metadata", e.Metadata)
		return
	}
	edits.Add("safety_identifier", e.Account)
}

// isEndUserMember reports whether key names a top-level member of a request of format f that
// names its end user.
func isEndUserMember(f llm.Format, key []byte) bool {
	if f == llm.FormatMessages {
		return string(key) == "metadata"
	}
	return string(key) == "safety_identifier" || string(key) == "user"
}

// DropEndUserIDs removes from the request of view v, of format f, the members that name its
// end user (chat and Responses safety_identifier and user, the Messages metadata object, whose
// one member is user_id), for an upstream sent none (end_user_ids: off), and returns their
// names for x-tollgate-dropped-fields (null ones, the same as absent, are removed unnamed).
func DropEndUserIDs(f llm.Format, v *jsonview.View, edits *jsonview.Edits) (dropped []string) {
	body := v.Body()
	for _, m := range v.Members() {
		if isEndUserMember(f, m.Key) {
			edits.Remove(m)
			if !isNull(body[m.Start:m.End]) {
				dropped = append(dropped, string(m.Key))
			}
		}
	}
	return dropped
}

// WithoutEndUserIDs is req with the end-user members of its Extra left out (an in-process
// request of the upstream's own format, whose Extra would otherwise pass through, for an
// upstream sent none), and their names.
func WithoutEndUserIDs(req llm.Request) (llm.Request, []string) {
	var dropped []string
	for k, v := range req.Extra {
		if isEndUserMember(req.Source, []byte(k)) {
			if dropped == nil {
				req.Extra = maps.Clone(req.Extra)
			}
			delete(req.Extra, k)
			if !isNull(v) {
				dropped = append(dropped, k)
			}
		}
	}
	slices.Sort(dropped)
	return req, dropped
}

// ClientEndUser is the end user a decoded request names, as the client sent it: chat and
// Responses safety_identifier, or user when it has none; Messages metadata.user_id. ok is
// false when it names none (absent, null or "").
func ClientEndUser(req *llm.Request) (value string, ok bool) {
	read := func(raw json.RawMessage) (string, bool) {
		var s string
		if isNull(raw) || json.Unmarshal(raw, &s) != nil || s == "" {
			return "", false
		}
		return s, true
	}
	switch req.Source {
	case llm.FormatChat, llm.FormatResponses:
		if s, ok := read(req.Extra["safety_identifier"]); ok {
			return s, true
		}
		return read(req.Extra["user"])
	case llm.FormatMessages:
		var md map[string]json.RawMessage
		if raw := req.Extra["metadata"]; isNull(raw) || json.Unmarshal(raw, &md) != nil {
			return "", false
		}
		return read(md["user_id"])
	}
	return "", false
}

// endUserWire writes req.EndUser as format f names it.
func endUserWire(f llm.Format, id string, o *object) {
	if id == "" {
		return
	}
	if f == llm.FormatMessages {
		o.set("metadata", object{{"user_id", id}})
		return
	}
	o.set("safety_identifier", id)
}

// nonEmptyString reports whether raw is a JSON string with something in it.
func nonEmptyString(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return len(s) > 2 && s[0] == '"'
}
