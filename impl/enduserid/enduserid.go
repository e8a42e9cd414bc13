// Package enduserid makes the end-user identifiers the gateway sends its providers in place of
// its clients' own: OpenAI's safety_identifier and user, Anthropic's metadata.user_id. Every
// account reaches a provider through the operator's one upstream account, so a client's raw
// value would let one tenant name another's end users (and have the provider flag or block
// them), and a request without one would leave the provider nothing below the operator's
// whole organisation to attribute abuse to.
//
// An identifier is namespaced by the account:
//
//	tg_<account>            the account's own, for a request that names no end user
//	tg_<account>_<user>     an end user of the account
//
// <account> is the account's id (a UUID, one AES block) encrypted with AES-256 under a key of
// the gateway's: stable, so that a provider can group a tenant's users, opaque to anyone without
// the key, and opened by the operator back to the account (Keys.Open) with no table to keep.
// <user> is HMAC-SHA256 of the client's value under a key of the account's (itself an HMAC of
// the account's id under the gateway's key), its first 16 bytes: the same value of the same
// account gives the same identifier every time, the same value of two accounts two that share
// nothing, and the operator given a raw value confirms the end user (Keys.Confirm). Both parts
// are 26 characters of lower-case base32 (a-z, 2-7), so an identifier is at most 56 characters
// of [a-z0-9_]: within OpenAI's limit for safety_identifier (64 characters in its API
// reference, 128 in openai-go v3.96.0's) and Anthropic's opaque user_id.
//
// The keys are derived from the server secret sealedid.SecretName (store.Secret), shared by
// the replicas and kept across restarts, with HMAC-SHA256 and a label of their own, so that
// they are never the sealing key itself.
package enduserid

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"hash"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Prefix begins every identifier the gateway makes.
const Prefix = "tg_"

// partLen is the length of an identifier's part: 16 bytes in unpadded base32.
const partLen = 26

// MaxLen is the length of the longest identifier: an end user's.
const MaxLen = len(Prefix) + partLen + 1 + partLen

// encoding is lower-case base32 without padding: letters and digits a report copies whole.
var encoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Labels of the keys derived from the server secret.
const (
	accountLabel = "tollgate end-user ids: account"
	userLabel    = "tollgate end-user ids: user"
)

// Keys make and open the identifiers. They are safe for concurrent use.
type Keys struct {
	account cipher.Block
	user    []byte
}

// New returns the Keys derived from the server secret (at least 32 bytes).
func New(secret []byte) (*Keys, error) {
	if len(secret) < 32 {
		return nil, errors.New("enduserid: the secret is shorter than 32 bytes")
	}
	block, err := aes.NewCipher(derive(secret, accountLabel))
	if err != nil {
		return nil, err
	}
	return &Keys{account: block, user: derive(secret, userLabel)}, nil
}

// derive is HMAC-SHA256 of label under key.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Account is one account's part of the identifiers, made once per account.
type Account struct {
	// id is the account's own identifier, "tg_<account>".
	id string
	// userKey is the account's key of its end users' parts; macs keeps HMACs keyed with it,
	// reset between uses (a keyed HMAC's Reset costs no allocation).
	userKey []byte
	macs    sync.Pool
}

// Account returns the account's part of the identifiers.
func (k *Keys) Account(account uuid.UUID) *Account {
	var sealed [aes.BlockSize]byte
	k.account.Encrypt(sealed[:], account[:])
	return &Account{id: Prefix + encoding.EncodeToString(sealed[:]), userKey: derive(k.user, string(account[:]))}
}

// ID is the account's own identifier, sent for a request that names no end user.
func (a *Account) ID() string { return a.id }

// AppendUser appends to dst the identifier of the end user whose value (as the client sent it,
// unescaped) is raw: the account's identifier, "_", and the HMAC of raw.
func (a *Account) AppendUser(dst, raw []byte) []byte {
	m, _ := a.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, a.userKey)
	}
	m.Reset()
	m.Write(raw)
	var sum [sha256.Size]byte
	dst = append(dst, a.id...)
	dst = append(dst, '_')
	dst = encoding.AppendEncode(dst, m.Sum(sum[:0])[:16])
	a.macs.Put(m)
	return dst
}

// User is AppendUser as a string.
func (a *Account) User(raw string) string { return string(a.AppendUser(nil, []byte(raw))) }

// Parsed is an identifier read back: its account's part, and its end user's when it has one.
type Parsed struct {
	account [16]byte
	user    string // "" for the account's own identifier
}

// ErrMalformed is the error of a string that is not an identifier the gateway makes.
var ErrMalformed = errors.New("not an end-user identifier of tollgate's: tg_ and 26 characters of a-z and 2-7, then optionally _ and 26 more")

// Parse reads an identifier without a key (its form only). Upper case is read as lower case,
// as a report may have changed it.
func Parse(id string) (Parsed, error) {
	var p Parsed
	rest, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(id)), Prefix)
	if !ok {
		return p, ErrMalformed
	}
	account, user, hasUser := strings.Cut(rest, "_")
	if len(account) != partLen || (hasUser && len(user) != partLen) {
		return p, ErrMalformed
	}
	if !decodePart(p.account[:], account) {
		return p, ErrMalformed
	}
	if hasUser {
		var u [16]byte
		if !decodePart(u[:], user) {
			return p, ErrMalformed
		}
		p.user = user
	}
	return p, nil
}

// decodePart decodes one part into dst (16 bytes), refusing a part that is not the one
// encoding of its bytes (the last character carries two bits; another would decode the same).
func decodePart(dst []byte, part string) bool {
	n, err := encoding.Decode(dst, []byte(part))
	return err == nil && n == len(dst) && encoding.EncodeToString(dst) == part
}

// EndUser reports whether the identifier names an end user (else it is the account's own).
func (p Parsed) EndUser() bool { return p.user != "" }

// Open is the account whose identifier p is. Any well-formed identifier opens to some id: the
// caller looks the account up, and an id that names none was not made with these keys.
func (k *Keys) Open(p Parsed) uuid.UUID {
	var id uuid.UUID
	k.account.Decrypt(id[:], p.account[:])
	return id
}

// Confirm reports whether p is the identifier of the end user whose value is raw, of the
// account it opens to.
func (k *Keys) Confirm(p Parsed, raw string) bool {
	if !p.EndUser() {
		return false
	}
	want := k.Account(k.Open(p)).User(raw)
	got := Prefix + encoding.EncodeToString(p.account[:]) + "_" + p.user
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
