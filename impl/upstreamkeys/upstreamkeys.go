// Package upstreamkeys seals the accounts' own upstream keys for storage and opens them again.
// An operator gives an account a key of its own for a provider (tollgate admin provider-key
// set): the account's attempts on that provider are then sent with it, not with the operator's
// key, so that the provider's prompt cache, which belongs to the upstream account a key is of
// (OpenAI's organisation, Anthropic's workspace), is the tenant's own (docs/inference.md).
//
// A key is stored sealed with AES-256-GCM under a key derived from the server secret
// sealedid.SecretName (store.Secret: shared by the replicas, kept across restarts) with
// HMAC-SHA256 and a label of its own, so that it is never the sealing key of the ids itself. The
// account's id and the provider's name are the seal's associated data: a sealed key copied to
// another account's row, or another provider's, does not open. A key that does not open is
// never replaced by the operator's (that would silently put the account back in the shared
// cache): the gateway refuses the account's requests to that provider instead.
//
// The seal keeps a key from whoever reads the table alone (a query's output, a copy of the
// table, a log of its rows); the server secret is in the same database, so a whole backup holds
// both, and restoring a backup needs both (docs/operations.md).
package upstreamkeys

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// label names the sealing key derived from the server secret.
const label = "tollgate upstream keys: seal"

// MaxLen is the longest key accepted: the providers' keys are a few hundred characters at
// most.
const MaxLen = 1024

// version begins every sealed key: the scheme it was sealed with.
const version = 1

// Sealer seals keys and opens them. It is safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns the Sealer of the server secret (at least 32 bytes).
func New(secret []byte) (*Sealer, error) {
	if len(secret) < 32 {
		return nil, errors.New("upstreamkeys: the secret is shorter than 32 bytes")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(label))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// associated is the seal's associated data: the account and the provider the key is for.
func associated(account uuid.UUID, provider string) []byte {
	return append(account[:len(account):len(account)], provider...)
}

// Seal seals key for the account's use on provider: a version byte, a random nonce and the
// ciphertext with its tag.
func (s *Sealer) Seal(account uuid.UUID, provider, key string) ([]byte, error) {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(key)+s.aead.Overhead())
	out[0] = version
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out[1:], []byte(key), associated(account, provider)), nil
}

// ErrNotOpened is the error of a sealed key that does not open: sealed under another secret
// (a database restored without its server secrets), for another account or provider, or
// damaged.
var ErrNotOpened = errors.New("upstreamkeys: the sealed key does not open")

// Open opens a key Seal sealed for the account's use on provider.
func (s *Sealer) Open(account uuid.UUID, provider string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != version {
		return "", ErrNotOpened
	}
	plain, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], associated(account, provider))
	if err != nil {
		return "", ErrNotOpened
	}
	return string(plain), nil
}

// Check refuses what cannot be a provider's key: an empty one, one longer than MaxLen, or one
// with a byte outside printable ASCII (a space, a line break: it goes into a header). The error
// never quotes the key.
func Check(key string) error {
	switch {
	case key == "":
		return errors.New("the key is empty")
	case len(key) > MaxLen:
		return fmt.Errorf("the key is %d bytes long, more than %d", len(key), MaxLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("the key has a byte that is not printable ASCII (a space, a line break or a control) at offset %d", i)
		}
	}
	return nil
}

// Hint is what the operator is shown of a key: its last four characters (the whole key is
// never shown), or "…" alone for a key of eight characters or fewer.
func Hint(key string) string {
	if len(key) <= 8 {
		return "…"
	}
	return "…" + key[len(key)-4:]
}
