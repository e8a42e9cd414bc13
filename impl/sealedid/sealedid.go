// Package sealedid turns the database's sequence ids into opaque tokens before a tenant sees
// them. A sequence such as usage_records.id counts every account's rows together, so a tenant
// who could read it (in a page cursor, say) would watch the whole gateway's volume; sealed, the
// token can be handed back to find the same row but says nothing of its number.
//
// A Seal is AES-256 applied to one 16-byte block holding two 64-bit integers: a pseudorandom
// permutation, so each pair has exactly one token and no token is shared; it needs no nonce and
// the token stays short (22 characters of unpadded base64url). It is not authenticated: a
// forged token opens to some other pair, so a caller checks what it opens (a page cursor's
// time and id are bounded) and scopes every look-up by the caller's account as it does anyway.
// The key is a server secret (store.Secret) shared by the replicas and kept across restarts, so
// a token made by one process opens in every other.
package sealedid

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"
)

// KeySize is the length of a Seal's key in bytes.
const KeySize = 32

// SecretName names the server secret (store.Secret) that is the key of every id the gateway
// seals for a tenant: the console's cursors and session ids, the statement's ledger entries.
const SecretName = "sealed_ids"

// tokenLen is the length of a token: 16 bytes in unpadded base64url.
const tokenLen = 22

// Seal seals pairs of integers as tokens and opens them again. It is safe for concurrent use.
type Seal struct {
	block cipher.Block
}

// New returns the Seal of a KeySize-byte key.
func New(key []byte) (*Seal, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sealedid: key of %d bytes, want %d", len(key), KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &Seal{block: b}, nil
}

// Pair is the token of the pair (a, b).
func (s *Seal) Pair(a, b int64) string {
	var plain, sealed [aes.BlockSize]byte
	binary.BigEndian.PutUint64(plain[:8], uint64(a))
	binary.BigEndian.PutUint64(plain[8:], uint64(b))
	s.block.Encrypt(sealed[:], plain[:])
	return base64.RawURLEncoding.EncodeToString(sealed[:])
}

// OpenPair is the pair whose token is token; ok is false when token is not the shape of one.
// Any string of that shape opens to some pair: the caller checks that the pair makes sense.
func (s *Seal) OpenPair(token string) (a, b int64, ok bool) {
	var sealed, plain [aes.BlockSize]byte
	if len(token) != tokenLen {
		return 0, 0, false
	}
	if n, err := base64.RawURLEncoding.Strict().Decode(sealed[:], []byte(token)); err != nil || n != aes.BlockSize {
		return 0, 0, false
	}
	s.block.Decrypt(plain[:], sealed[:])
	return int64(binary.BigEndian.Uint64(plain[:8])), int64(binary.BigEndian.Uint64(plain[8:])), true
}

// Tagged is the token of the positive id of one kind of row, tag naming the kind (a constant
// of the caller's): a token of one kind (a session's) never opens as another's (a page cursor),
// as OpenTagged checks.
func (s *Seal) Tagged(id, tag int64) string { return s.Pair(id, tag) }

// OpenTagged is the id whose token Tagged made with tag; ok is false for a token of another
// kind, of no id, or of no shape.
func (s *Seal) OpenTagged(token string, tag int64) (id int64, ok bool) {
	id, t, ok := s.OpenPair(token)
	return id, ok && t == tag && id > 0
}

// Loader makes a Seal once its key can be read and keeps it. A failed read (the database away)
// is returned and tried again at the next call, so a process that started during an outage
// seals as soon as the database is back.
type Loader struct {
	key func(context.Context) ([]byte, error)

	mu   sync.Mutex
	seal *Seal
}

// NewLoader returns a Loader that reads its key with key.
func NewLoader(key func(context.Context) ([]byte, error)) *Loader {
	return &Loader{key: key}
}

// Seal is the Seal, reading its key first if no call has yet.
func (l *Loader) Seal(ctx context.Context) (*Seal, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seal != nil {
		return l.seal, nil
	}
	k, err := l.key(ctx)
	if err != nil {
		return nil, err
	}
	s, err := New(k)
	if err != nil {
		return nil, err
	}
	l.seal = s
	return s, nil
}
