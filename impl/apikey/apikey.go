// Package apikey owns the format of tollgate API keys: generation, offline validation and
// hashing. A key is the prefix "tgk_", 43 base62 characters carrying 32 random bytes, and a
// 6-character base62 CRC-32 of those 43 characters, so a mistyped or truncated key is refused
// without a database lookup. Only the SHA-256 of a key is ever stored.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"math/big"
)

// Prefix starts every tollgate API key.
const Prefix = "tgk_"

const (
	bodyLen     = 43 // base62 digits for 256 bits
	checksumLen = 6  // base62 digits for 32 bits
	// Len is the length of every well-formed key.
	Len = len(Prefix) + bodyLen + checksumLen
	// DisplayLen is how much of a key is kept for display (prefix and the first 8 characters).
	DisplayLen = len(Prefix) + 8
)

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// ErrMalformed reports a string that is not a well-formed tollgate API key.
var ErrMalformed = errors.New("malformed API key")

// ErrChecksum reports a string of a key's form (prefix, length, alphabet) whose checksum does
// not match its body: a key with a character changed, as by a typing or copying mistake. It is
// an ErrMalformed.
var ErrChecksum = fmt.Errorf("%w: its checksum does not match", ErrMalformed)

// Hash is the SHA-256 of a key, the only form in which keys are stored.
type Hash [sha256.Size]byte

// Generated is a freshly minted key: Plain is shown to its owner once and never stored.
type Generated struct {
	Plain         string
	Hash          Hash
	DisplayPrefix string
}

// Generate mints a new key from 32 bytes of crypto/rand randomness.
func Generate() (Generated, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Generated{}, err
	}
	body := encode(new(big.Int).SetBytes(raw[:]), bodyLen)
	plain := Prefix + body + checksum(body)
	return Generated{Plain: plain, Hash: sha256.Sum256([]byte(plain)), DisplayPrefix: plain[:DisplayLen]}, nil
}

// Parse checks the key's prefix, length, alphabet and checksum and returns its hash.
func Parse(key string) (Hash, error) {
	if len(key) != Len || key[:len(Prefix)] != Prefix {
		return Hash{}, ErrMalformed
	}
	for i := len(Prefix); i < len(key); i++ {
		if !isBase62(key[i]) {
			return Hash{}, ErrMalformed
		}
	}
	body := key[len(Prefix) : len(Prefix)+bodyLen]
	var sum [checksumLen]byte
	if string(appendChecksum(sum[:0], body)) != key[len(Prefix)+bodyLen:] {
		return Hash{}, ErrChecksum
	}
	// The key is copied to the stack: a conversion of the string would be a heap allocation on
	// every authenticated request.
	var b [Len]byte
	copy(b[:], key)
	return sha256.Sum256(b[:]), nil
}

func isBase62(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
}

// checksum is the base62 CRC-32 of a key's body.
func checksum(body string) string {
	var sum [checksumLen]byte
	return string(appendChecksum(sum[:0], body))
}

// appendChecksum appends the base62 CRC-32 of body, checksumLen digits, to dst. Every key is
// checked with it, so it works on machine integers (62^6 > 2^32) and allocates nothing: the
// CRC is the table-driven loop over the string itself (hash/crc32 takes a byte slice, and the
// conversion would be a heap allocation per request).
func appendChecksum(dst []byte, body string) []byte {
	n := ^uint32(0)
	for i := 0; i < len(body); i++ {
		n = crc32.IEEETable[byte(n)^body[i]] ^ (n >> 8)
	}
	n = ^n
	var digits [checksumLen]byte
	for i := checksumLen - 1; i >= 0; i-- {
		digits[i] = alphabet[n%62]
		n /= 62
	}
	return append(dst, digits[:]...)
}

// encode writes n in base62, left-padded with zeros to width digits.
func encode(n *big.Int, width int) string {
	out := make([]byte, width)
	base := big.NewInt(62)
	mod := new(big.Int)
	for i := width - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = alphabet[mod.Int64()]
	}
	return string(out)
}
