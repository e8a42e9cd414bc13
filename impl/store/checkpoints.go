package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// StreamCheckpoint is a stream in flight as its process last wrote it to stream_checkpoints:
// the usage record the stream would be settled with if it were cut then, priced and costed as
// the usage writer bills it. A process writes the checkpoints of all its streams every
// checkpoint interval; when the process is gone, a reaper bills them (see impl/billing,
// "Leases and crashes").
type StreamCheckpoint struct {
	// Holder is the process (its name in credit_holds) that runs the stream.
	Holder string
	// Record is the usage record the stream would be settled with.
	Record UsageRecord
	// UpdatedAt is when the process last wrote the checkpoint, by the database's clock, and
	// ExpiresAt when its lease ends unless the process writes it again.
	UpdatedAt time.Time
	ExpiresAt time.Time
}

// SaveStreamCheckpoints writes the holder's checkpoints of its streams in flight (one usage
// record each) in one statement, each with a lease from now: a checkpoint of the same account
// and request id is replaced. A stream whose usage record is already written gets none, and
// the holder's checkpoints whose usage record is written (one that raced past its stream's
// settlement) are deleted. It returns how many checkpoints it wrote and how many of those
// stale ones it deleted. With no records it only deletes the stale ones.
func (s *Store) SaveStreamCheckpoints(ctx context.Context, holder string, lease time.Duration, records []UsageRecord) (saved, cleaned int64, err error) {
	p := db.SaveStreamCheckpointsParams{
		AccountIds: make([]uuid.UUID, 0, len(records)), RequestIds: make([]string, 0, len(records)),
		Records: make([][]byte, 0, len(records)), Holder: holder, LeaseMillis: leaseMillis(lease),
	}
	sorted := slices.Clone(records)
	// Rows are written in the order every statement on the table locks them.
	slices.SortFunc(sorted, func(a, b UsageRecord) int {
		if c := bytes.Compare(a.AccountID[:], b.AccountID[:]); c != 0 {
			return c
		}
		return strings.Compare(CleanText(a.RequestID), CleanText(b.RequestID))
	})
	for i, r := range sorted {
		if i > 0 && r.AccountID == sorted[i-1].AccountID && CleanText(r.RequestID) == CleanText(sorted[i-1].RequestID) {
			continue // one row per request: the statement cannot write a row twice
		}
		b, err := encodeCheckpoint(r)
		if err != nil {
			return 0, 0, err
		}
		p.AccountIds = append(p.AccountIds, r.AccountID)
		p.RequestIds = append(p.RequestIds, CleanText(r.RequestID))
		p.Records = append(p.Records, b)
	}
	row, err := s.q.SaveStreamCheckpoints(ctx, p)
	if err != nil {
		return 0, 0, err
	}
	return row.Saved, row.Cleaned, nil
}

// LostStreamCheckpoints returns up to limit checkpoints of processes that are gone: not those of
// alive (the caller's own process), and either past their own lease, or of a holder in gone
// (whose holds the caller has just reaped), or of a holder that has a credit hold whose lease
// has expired. They come ordered by holder.
func (s *Store) LostStreamCheckpoints(ctx context.Context, alive string, gone []string, limit int) ([]StreamCheckpoint, error) {
	if gone == nil {
		gone = []string{}
	}
	rows, err := s.q.ListLostStreamCheckpoints(ctx, db.ListLostStreamCheckpointsParams{
		Alive: alive, GoneHolders: gone, MaxRows: int32(max(min(limit, 1<<20), 1)),
	})
	if err != nil {
		return nil, err
	}
	return checkpointsFromRows(rows)
}

// StreamCheckpoints lists the account's checkpoints, by request id.
func (s *Store) StreamCheckpoints(ctx context.Context, accountID uuid.UUID) ([]StreamCheckpoint, error) {
	rows, err := s.q.ListStreamCheckpoints(ctx, accountID)
	if err != nil {
		return nil, err
	}
	return checkpointsFromRows(rows)
}

// DeleteHolderStreamCheckpoints deletes every checkpoint of the holder (a process that drained:
// its usage records are written) and says how many there were.
func (s *Store) DeleteHolderStreamCheckpoints(ctx context.Context, holder string) (int64, error) {
	return s.q.DeleteHolderStreamCheckpoints(ctx, holder)
}

// endStreamCheckpoints is WriteUsage's part for stream checkpoints and key reservations, in its
// transaction, after the records were written: it deletes the checkpoints of the batch's
// records that had one (Checkpointed or SettleKey), and makes the key reservations of the
// records that settle their key's (SettleKey: a capped key's request, or one billed from a lost
// stream's checkpoint), written now or refused as duplicates, count what the ledger billed for
// their request ids (SettleKeyReservationsAtBill): a reservation nobody settled is settled at
// it, one settled at another amount (by another attempt of the request id, or by a settlement
// of unknown outcome that added what the record does not charge) is
// moved to it. A batch without such records costs nothing more; one with them costs one
// statement, which looks each of their request ids up in key_reservations and in the
// partitions of usage_records that hold the records started within billedAttemptWindow of it
// (one index probe each, one to three partitions).
func endStreamCheckpoints(ctx context.Context, q *db.Queries, records []UsageRecord) error {
	var del db.DeleteStreamCheckpointsParams
	var keys db.SettleKeyReservationsAtBillParams
	for _, r := range records {
		if r.Checkpointed || r.SettleKey {
			del.AccountIds = append(del.AccountIds, r.AccountID)
			del.RequestIds = append(del.RequestIds, CleanText(r.RequestID))
		}
		// A request id that is not clean text has no reservation (the database refused it).
		if r.SettleKey && r.APIKeyID != uuid.Nil && CleanText(r.RequestID) == r.RequestID {
			keys.KeyIds = append(keys.KeyIds, r.APIKeyID)
			keys.AccountIds = append(keys.AccountIds, r.AccountID)
			keys.RequestIds = append(keys.RequestIds, r.RequestID)
			keys.Costs = append(keys.Costs, max(r.CostMicros, 0))
			keys.StartedAt = append(keys.StartedAt, r.StartedAt)
		}
	}
	if len(del.RequestIds) > 0 {
		if _, err := q.DeleteStreamCheckpoints(ctx, del); err != nil {
			return fmt.Errorf("delete stream checkpoints: %w", err)
		}
	}
	if len(keys.KeyIds) > 0 {
		keys.WindowMillis = leaseMillis(billedAttemptWindow)
		if _, err := q.SettleKeyReservationsAtBill(ctx, keys); err != nil {
			return fmt.Errorf("settle the key reservations at what the ledger billed: %w", err)
		}
	}
	return nil
}

// encodeCheckpoint is a usage record as a checkpoint's record column keeps it: JSON of the
// record, its text made safe for PostgreSQL (no NUL bytes, which jsonb refuses, and valid
// UTF-8) as the usage writer makes it. A checkpoint lives for at most a lease, so a change of
// UsageRecord between two versions of the gateway costs at most the checkpoints in flight at
// the upgrade (a field the reader does not know is ignored, one it misses is zero).
func encodeCheckpoint(r UsageRecord) ([]byte, error) {
	r.RequestID, r.Model, r.Route = CleanText(r.RequestID), CleanText(r.Model), CleanText(r.Route)
	r.Provider, r.UpstreamModel = CleanText(r.Provider), CleanText(r.UpstreamModel)
	r.Status, r.ServiceTier = CleanText(r.Status), CleanText(r.ServiceTier)
	if len(r.HostedCalls) > 0 {
		calls := make(map[string]int64, len(r.HostedCalls))
		for name, n := range r.HostedCalls {
			calls[CleanText(name)] = n
		}
		r.HostedCalls = calls
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("store: encode the checkpoint of request %q: %w", r.RequestID, err)
	}
	return b, nil
}

func checkpointsFromRows(rows []db.StreamCheckpoint) ([]StreamCheckpoint, error) {
	out := make([]StreamCheckpoint, len(rows))
	for i, row := range rows {
		out[i] = StreamCheckpoint{Holder: row.Holder, UpdatedAt: row.UpdatedAt, ExpiresAt: row.ExpiresAt}
		// A field whose type changed between versions is left zero (json fills in the others),
		// rather than keep the checkpoint from being billed at all.
		var typeErr *json.UnmarshalTypeError
		if err := json.Unmarshal(row.Record, &out[i].Record); err != nil && !errors.As(err, &typeErr) {
			return nil, fmt.Errorf("store: decode the checkpoint of request %q: %w", row.RequestID, err)
		}
		// The row's keys rule: they are what the usage record's unique index is checked against.
		out[i].Record.AccountID, out[i].Record.RequestID = row.AccountID, row.RequestID
	}
	return out, nil
}
