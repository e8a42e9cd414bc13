package billing

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
)

// TestRecordRefusedAsDataIsSetAside: trial h7's D1. An upstream reported 9,223,372,036,854,775,807
// input tokens; the record's day total overflowed in the database (bigint out of range), the
// writer retried the batch as if the database were away, and no usage record of any account was
// written after it, across restarts. A batch the database refuses as data is now written in
// halves down to the record it refuses, which is set aside (logged, counted, not billed): the
// records before and after it, of this account and another, are billed.
func TestRecordRefusedAsDataIsSetAside(t *testing.T) {
	ctx := context.Background()
	_, st := newDB(t)
	const granted = 10_000_000
	acct, other := newAccount(t, st, granted), newAccount(t, st, granted)
	var logs logSink
	m := New(st, Options{Logger: logs.logger(), FlushInterval: time.Hour, RetryMax: 50 * time.Millisecond})
	p := checkpointPrice
	for _, c := range []struct {
		acct  uuid.UUID
		id    string
		input int64
	}{{acct, "before", 1000}, {acct, "absurd", math.MaxInt64}, {other, "other", 1000}, {acct, "after", 1000}} {
		r, err := m.Reserve(ctx, c.acct, c.id, 100_000)
		if err != nil {
			t.Fatal(err)
		}
		r.SettleUsage(UsageRecord{Model: "m", Route: "/v1/messages", Tokens: price.Tokens{Uncached: c.input, Output: 5}, Price: &p, Status: "ok"})
	}
	if err := m.flushAll(ctx); err != nil {
		t.Fatalf("the writer stops at the refused record: %v", err)
	}
	if s := m.WriterStats(); s.SetAside != 1 || s.Backlog != 0 || s.Queued != 0 {
		t.Errorf("writer %+v: want one record set aside, nothing waiting", s)
	}
	if err := m.Close(ctx); err != nil { // returns the holds
		t.Fatal(err)
	}
	checkBilledOnce(t, st, acct, granted, map[string]int64{"before": streamCost(1000, 5), "after": streamCost(1000, 5)})
	checkBilledOnce(t, st, other, granted, map[string]int64{"other": streamCost(1000, 5)})
	if got := strings.Join(logs.all(), "\n"); !strings.Contains(got, "set aside") || !strings.Contains(got, "absurd") {
		t.Errorf("the set-aside record is not logged with its request:\n%s", got)
	}
}
