package store_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// checkpointStart is when the test's streams started.
var checkpointStart = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

// checkpointRecord is a priced record of a stream of the account, as a checkpoint keeps it.
func checkpointRecord(acct uuid.UUID, id string, output int64) store.UsageRecord {
	p := price.Price{Rates: price.Rates{Input: 3_000_000, Output: 15_000_000}}
	t := price.Tokens{Uncached: 100, Output: output}
	c := price.Cost(t, p)
	return store.UsageRecord{AccountID: acct, RequestID: id, Model: "m\x00odel", Route: "/v1/messages", Provider: "sim", UpstreamModel: "up",
		InputTokens: t.Input(), OutputTokens: output, Price: &p, Costs: c, CostMicros: c.Total(), Status: "process_lost",
		StartedAt: checkpointStart, FinishedAt: checkpointStart.Add(time.Duration(output) * time.Millisecond)}
}

// requestIDs returns the request ids of the checkpoints, sorted.
func requestIDs(cks []store.StreamCheckpoint) []string {
	var ids []string
	for _, c := range cks {
		ids = append(ids, c.Record.RequestID)
	}
	slices.Sort(ids)
	return ids
}

// TestStreamCheckpointsFollowTheUsageRecords: a holder's checkpoints round-trip (a NUL byte in a
// name, which jsonb refuses, is dropped as the usage writer drops it); a checkpoint is replaced by
// the next one of the same request; a usage record written with Checkpointed deletes its
// request's checkpoint in the same transaction; a checkpoint whose usage record is already
// written is not saved again, and the holder's next save deletes one left behind; the lost
// checkpoints are those of other holders past their lease or with an expired credit hold, never
// the caller's own.
func TestStreamCheckpointsFollowTheUsageRecords(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 10_000_000)

	saved, cleaned, err := st.SaveStreamCheckpoints(ctx, "gw-a", time.Minute,
		[]store.UsageRecord{checkpointRecord(acct, "b", 10), checkpointRecord(acct, "a", 10), checkpointRecord(acct, "a", 10)})
	if err != nil || saved != 2 || cleaned != 0 {
		t.Fatalf("saved %d, cleaned %d (%v), want 2 and 0", saved, cleaned, err)
	}
	if _, _, err := st.SaveStreamCheckpoints(ctx, "gw-a", time.Minute, []store.UsageRecord{checkpointRecord(acct, "a", 30), checkpointRecord(acct, "b", 20)}); err != nil {
		t.Fatal(err)
	}
	cks, err := st.StreamCheckpoints(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if got := requestIDs(cks); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("checkpoints %v", got)
	}
	want := checkpointRecord(acct, "a", 30)
	got := cks[0].Record
	if cks[0].Holder != "gw-a" || got.OutputTokens != 30 || got.CostMicros != want.CostMicros || got.Costs != want.Costs ||
		got.Model != "model" || !reflect.DeepEqual(*got.Price, *want.Price) || !got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) || !cks[0].ExpiresAt.After(cks[0].UpdatedAt) {
		t.Errorf("checkpoint a: %+v, want the record %+v held by gw-a", cks[0], want)
	}

	// b settles: its record deletes its checkpoint with it.
	b := checkpointRecord(acct, "b", 25)
	b.Status, b.Checkpointed = "ok", true
	if _, err := st.WriteUsage(ctx, "gw-a", []store.UsageRecord{b}); err != nil {
		t.Fatal(err)
	}
	if cks, _ := st.StreamCheckpoints(ctx, acct); !slices.Equal(requestIDs(cks), []string{"a"}) {
		t.Fatalf("after b's record: checkpoints %v", requestIDs(cks))
	}
	// A save that raced past b's settlement does not bring its checkpoint back.
	if saved, _, err := st.SaveStreamCheckpoints(ctx, "gw-a", time.Minute, []store.UsageRecord{checkpointRecord(acct, "b", 25)}); err != nil || saved != 0 {
		t.Fatalf("saved %d (%v) for a request already billed", saved, err)
	}
	// a's record is written without deleting its checkpoint (as if the checkpoint had landed
	// after it): the holder's next save deletes it.
	a := checkpointRecord(acct, "a", 40)
	if _, err := st.WriteUsage(ctx, "gw-a", []store.UsageRecord{a}); err != nil {
		t.Fatal(err)
	}
	if saved, cleaned, err := st.SaveStreamCheckpoints(ctx, "gw-a", time.Minute, nil); err != nil || saved != 0 || cleaned != 1 {
		t.Fatalf("saved %d, cleaned %d (%v), want 0 and 1", saved, cleaned, err)
	}
	if cks, _ := st.StreamCheckpoints(ctx, acct); len(cks) != 0 {
		t.Fatalf("checkpoints left: %v", requestIDs(cks))
	}

	// Lost checkpoints: gw-b's lease is over, gw-c has an expired credit hold, gw-d is alive,
	// and gw-e is the caller.
	for _, h := range []struct {
		holder string
		lease  time.Duration
		id     string
	}{{"gw-b", time.Millisecond, "lost-lease"}, {"gw-c", time.Minute, "lost-hold"}, {"gw-d", time.Minute, "alive"}, {"gw-e", time.Millisecond, "mine"}} {
		if _, _, err := st.SaveStreamCheckpoints(ctx, h.holder, h.lease, []store.UsageRecord{checkpointRecord(acct, h.id, 5)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.TakeCreditHold(ctx, store.HoldRequest{AccountID: acct, Holder: "gw-c", NeedMicros: 1000, Lease: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	lost, err := st.LostStreamCheckpoints(ctx, "gw-e", nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := requestIDs(lost); !slices.Equal(got, []string{"lost-hold", "lost-lease"}) {
		t.Errorf("lost checkpoints %v, want lost-hold and lost-lease", got)
	}
	lost, err = st.LostStreamCheckpoints(ctx, "gw-e", []string{"gw-d"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := requestIDs(lost); !slices.Equal(got, []string{"alive", "lost-hold", "lost-lease"}) {
		t.Errorf("lost checkpoints with gw-d gone %v", got)
	}
	if n, err := st.DeleteHolderStreamCheckpoints(ctx, "gw-d"); err != nil || n != 1 {
		t.Errorf("deleted %d of gw-d's checkpoints (%v)", n, err)
	}
}
