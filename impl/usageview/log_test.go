package usageview_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
)

// allPages pages through the account's log with f, limit rows a page, calling between(page)
// after every page.
func allPages(t *testing.T, f *fixture, acct uuid.UUID, filter usageview.Filter, limit int, between func()) []usageview.Request {
	t.Helper()
	var out []usageview.Request
	after := usageview.Cursor{}
	for pages := 0; ; pages++ {
		p, err := f.svc.RequestLog(f.ctx, acct, filter, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Requests) > limit {
			t.Fatalf("page of %d rows, limit %d", len(p.Requests), limit)
		}
		out = append(out, p.Requests...)
		if p.Next.IsZero() {
			return out
		}
		if pages > 10_000 {
			t.Fatal("the pages never end")
		}
		// The cursor goes through its URL form, as a next-page link carries it.
		after, err = usageview.OpenCursor(testSeal, p.Next.Seal(testSeal))
		if err != nil {
			t.Fatal(err)
		}
		if between != nil {
			between()
		}
	}
}

// TestRequestLogPagesUnderConcurrentInserts pages through 300 requests (three to each start
// time, so that the id breaks the ties) eleven at a time, unfiltered and filtered by key,
// while another goroutine writes new requests through the usage writer between every two
// pages, with start times before, at and after the cursor's. Every request that existed at
// the start appears exactly once, no request appears twice, and the order is strictly newest
// first by (start time, id).
func TestRequestLogPagesUnderConcurrentInserts(t *testing.T) {
	base := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, base)
	acct := f.account("a")
	key := f.key(acct, "alpha")
	var initial []store.UsageRecord
	for i := range 300 {
		initial = append(initial, store.UsageRecord{AccountID: acct, RequestID: fmt.Sprintf("init-%03d", i),
			APIKeyID: key, Model: "m", Route: "/v1/chat/completions", Provider: "sim", UpstreamModel: "e",
			CostMicros: 10, Status: "completed", StartedAt: base.Add(time.Duration(i/3) * time.Second)})
	}
	f.write(initial...)

	for _, filter := range []usageview.Filter{{}, {KeyID: key}} {
		ctx, cancel := context.WithCancel(f.ctx)
		wrote := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		var writeErr error
		go func() { // owned by this loop: cancelled and waited for below
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, uint64(len(filter.Model))))
			for n := 0; ; n++ {
				batch := make([]store.UsageRecord, 5)
				for i := range batch {
					at := base.Add(time.Duration(rng.IntN(140)-20) * time.Second)
					batch[i] = store.UsageRecord{AccountID: acct, RequestID: fmt.Sprintf("new-%v-%d-%d", filter.KeyID != uuid.Nil, n, i),
						APIKeyID: key, Model: "m", Route: "/v1/chat/completions", Provider: "sim", UpstreamModel: "e",
						CostMicros: 10, Status: "completed", StartedAt: at, FinishedAt: at.Add(time.Second)}
				}
				if _, err := f.st.WriteUsage(ctx, "writer", batch); err != nil {
					if ctx.Err() == nil {
						writeErr = err
					}
					return
				}
				select {
				case wrote <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}()
		got := allPages(t, f, acct, filter, 11, func() { <-wrote })
		cancel()
		wg.Wait()
		if writeErr != nil {
			t.Fatal(writeErr)
		}
		seen := map[string]int{}
		for i, r := range got {
			seen[r.RequestID]++
			if i > 0 {
				prev := got[i-1]
				if !(r.StartedAt.Before(prev.StartedAt) || r.StartedAt.Equal(prev.StartedAt) && r.ID < prev.ID) {
					t.Fatalf("row %d (%v, %d) is not older than row %d (%v, %d)", i, r.StartedAt, r.ID, i-1, prev.StartedAt, prev.ID)
				}
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s appeared %d times", id, n)
			}
		}
		for _, r := range initial {
			if seen[r.RequestID] != 1 {
				t.Errorf("filter %+v: %s is missing", filter, r.RequestID)
			}
		}
		t.Logf("key filter %v: %d rows, %d of them written before or while paging", filter.KeyID != uuid.Nil, len(got), len(got)-len(initial))
	}
}

// TestRequestLogFiltersAndTenancy checks every filter, alone and combined (through each of
// the three page queries), against the same selection made in Go, page by page; and that
// another account's requests, and its key id or a model only it uses, never show.
func TestRequestLogFiltersAndTenancy(t *testing.T) {
	base := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, base)
	a, b := f.account("a"), f.account("b")
	k1, k2, kb := f.key(a, "alpha"), f.key(a, "beta"), f.key(b, "other")
	models := []string{"m-a", "m-b", "m-c"}
	routes := []string{"/v1/chat/completions", "/v1/messages"}
	var recs, others []store.UsageRecord
	for i := range 150 {
		r := store.UsageRecord{AccountID: a, Model: models[i%3], Route: routes[i%2], Provider: "sim",
			UpstreamModel: "e", CostMicros: int64(i), Status: "completed", StartedAt: base.Add(time.Duration(i) * 37 * time.Second)}
		r.APIKeyID = []uuid.UUID{k1, k2, uuid.Nil}[(i/2)%3]
		if i%7 == 0 {
			r.Status = "failed"
		}
		recs = append(recs, r)
		if i%2 == 0 {
			o := r
			o.AccountID, o.APIKeyID, o.StartedAt = b, kb, r.StartedAt.Add(time.Second)
			if i%10 == 0 {
				o.Model = "only-b"
			}
			others = append(others, o)
		}
	}
	f.write(recs...)
	f.write(others...)
	recs = nil // read back with their request ids
	all := allPages(t, f, a, usageview.Filter{}, 1000, nil)
	if len(all) != 150 {
		t.Fatalf("account a has %d requests, want 150", len(all))
	}
	from, to := base.Add(20*time.Minute), base.Add(70*time.Minute)
	cases := []struct {
		name string
		f    usageview.Filter
	}{
		{"none", usageview.Filter{}},
		{"model", usageview.Filter{Model: "m-b"}},
		{"key", usageview.Filter{KeyID: k1}},
		{"key and model", usageview.Filter{KeyID: k2, Model: "m-a"}},
		{"route and status", usageview.Filter{Route: "/v1/messages", Status: "failed"}},
		{"model, route and time", usageview.Filter{Model: "m-c", Route: "/v1/chat/completions", From: from, To: to}},
		{"time", usageview.Filter{From: from, To: to}},
		{"from only", usageview.Filter{From: to}},
		{"another account's key", usageview.Filter{KeyID: kb}},
		{"another account's model", usageview.Filter{Model: "only-b"}},
		{"unknown status", usageview.Filter{Status: "nope"}},
	}
	for _, c := range cases {
		var want []string
		for _, r := range all {
			if (c.f.Model == "" || r.Model == c.f.Model) && (c.f.KeyID == uuid.Nil || r.KeyID == c.f.KeyID) &&
				(c.f.Route == "" || r.Route == c.f.Route) && (c.f.Status == "" || r.Status == c.f.Status) &&
				(c.f.From.IsZero() || !r.StartedAt.Before(c.f.From)) && (c.f.To.IsZero() || r.StartedAt.Before(c.f.To)) {
				want = append(want, r.RequestID)
			}
		}
		var gotIDs []string
		for _, r := range allPages(t, f, a, c.f, 7, nil) {
			gotIDs = append(gotIDs, r.RequestID)
			if r.KeyID == k1 && (r.KeyName != "alpha" || r.KeyPrefix != "tgk_alph") {
				t.Errorf("key of %s named %q %q", r.RequestID, r.KeyName, r.KeyPrefix)
			}
		}
		if !slices.Equal(gotIDs, want) {
			t.Errorf("%s: got %d requests %v, want %d %v", c.name, len(gotIDs), gotIDs, len(want), want)
		}
		if c.name != "another account's key" && c.name != "another account's model" && c.name != "unknown status" && len(want) == 0 {
			t.Errorf("%s: the case selects nothing", c.name)
		}
	}
	for _, r := range allPages(t, f, b, usageview.Filter{}, 50, nil) {
		if r.KeyID != kb {
			t.Fatalf("account b sees %s of key %v", r.RequestID, r.KeyID)
		}
	}
	// A key of account a as account b's filter, and a's latest cursor on b, find nothing of a.
	if p, err := f.svc.RequestLog(f.ctx, b, usageview.Filter{KeyID: k1}, usageview.Cursor{}, 50); err != nil || len(p.Requests) != 0 {
		t.Fatalf("account b filtered by a's key: %d rows, %v", len(p.Requests), err)
	}
	// The latency and the other columns come through.
	r := all[len(all)-1]
	if r.Latency() != 250*time.Millisecond || r.Provider != "sim" || r.UpstreamModel != "e" || r.Route == "" || r.ID == 0 {
		t.Fatalf("oldest request read back as %+v", r)
	}
}
