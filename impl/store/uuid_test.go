package store

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// TestUUIDCodec: with the store's codec, a uuid.UUID and a []uuid.UUID encode to PostgreSQL's
// binary uuid and uuid[] exactly as pgx encodes their bytes, and a binary uuid scans back.
func TestUUIDCodec(t *testing.T) {
	plain, ours := pgtype.NewMap(), pgtype.NewMap()
	registerUUIDCodec(ours)
	ids := []uuid.UUID{uuid.New(), uuid.Nil, uuid.New()}
	raw := make([][16]byte, len(ids))
	for i, id := range ids {
		raw[i] = id
	}

	got, err := ours.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, ids[0], nil)
	if err != nil || !bytes.Equal(got, ids[0][:]) {
		t.Fatalf("encode %v: %x, %v", ids[0], got, err)
	}
	want, err := plain.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = ours.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("encode %v: %x, %v; want %x", ids, got, err, want)
	}

	var back uuid.UUID
	if err := ours.Scan(pgtype.UUIDOID, pgtype.BinaryFormatCode, ids[2][:], &back); err != nil || back != ids[2] {
		t.Fatalf("scan: %v, %v", back, err)
	}
	if err := ours.Scan(pgtype.UUIDOID, pgtype.BinaryFormatCode, []byte{1, 2}, &back); err == nil {
		t.Error("a 2-byte uuid scanned")
	}
	var fromText uuid.UUID
	if err := ours.Scan(pgtype.UUIDOID, pgtype.TextFormatCode, []byte(ids[0].String()), &fromText); err != nil || fromText != ids[0] {
		t.Fatalf("scan text: %v, %v", fromText, err)
	}
}

func BenchmarkEncodeUUIDs(b *testing.B) {
	ids := make([]uuid.UUID, 200)
	for i := range ids {
		ids[i] = uuid.New()
	}
	for _, c := range []struct {
		name     string
		register bool
	}{{"driver.Valuer", false}, {"store codec", true}} {
		b.Run(c.name, func(b *testing.B) {
			m := pgtype.NewMap()
			if c.register {
				registerUUIDCodec(m)
			}
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
