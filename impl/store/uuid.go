package store

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// registerUUIDCodec teaches a connection's type map to send and read github.com/google/uuid
// values as PostgreSQL's 16-byte binary uuid. Out of the box pgx knows uuid.UUID only as a
// driver.Valuer and a sql.Scanner: it formats every value as text and parses the text again
// before it sends it, and reads each one back through a string, which costs the batching
// writer two allocations and a parse per id. The generated queries take and return uuid.UUID
// (see the overrides in sqlc.yaml), so the codec is registered on every connection of the
// store instead of converting at each call. Anything else a uuid column is bound to or read
// into (pgtype.UUID, [16]byte, strings) goes through pgx's own codec as before.
func registerUUIDCodec(m *pgtype.Map) {
	elem := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(elem)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: elem}})
}

// uuidCodec is pgx's uuid codec with binary plans for uuid.UUID and *uuid.UUID.
type uuidCodec struct{ pgtype.UUIDCodec }

// PlanEncode implements pgtype.Codec.
func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return encodeUUIDBinary{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

// PlanScan implements pgtype.Codec.
func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return scanUUIDBinary{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

// encodeUUIDBinary writes a uuid.UUID's 16 bytes as they are.
type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	return append(buf, id[:]...), nil
}

// scanUUIDBinary reads a binary uuid into a *uuid.UUID. NULL leaves the target as it is, as
// uuid.UUID's own Scan does.
type scanUUIDBinary struct{}

func (scanUUIDBinary) Scan(src []byte, target any) error {
	if src == nil {
		return nil
	}
	if len(src) != len(uuid.UUID{}) {
		return fmt.Errorf("invalid length for uuid: %d bytes", len(src))
	}
	copy(target.(*uuid.UUID)[:], src)
	return nil
}
