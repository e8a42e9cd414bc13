package billing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestHungDatabaseAnswersTogether: while the database hangs (a stopped server: connections
// open, no answer), the reservations of an account its hold does not cover are answered
// together once the first call to the database has timed out, one at a time asking it for
// credit: not each after the one before it (trial h17: ten requests of one account sent at
// once were answered 15, 20, ... 60 s later, 5 s apart, while PostgreSQL was SIGSTOPped). Each
// reservation here may wait four times WriteTimeout, where the old code made the tenth wait ten
// times: the check is which answer each gets, the failure handling's or its own deadline.
func TestHungDatabaseAnswersTogether(t *testing.T) {
	cs, st0 := newDB(t)
	acct := newAccount(t, st0, 100_000_000)
	relay := newRelay(t, cs)
	st := openStore(t, relay.ConnString())
	const writeTimeout = 400 * time.Millisecond
	m := New(st, Options{WriteTimeout: writeTimeout})
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(runCtx) }()
	defer func() { stop(); <-ran }()

	relay.Hang()
	defer relay.Unhang()
	const n = 10
	errs := make([]error, n)
	late := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 4*writeTimeout)
			defer cancel()
			r, err := m.Reserve(ctx, acct, fmt.Sprintf("hung-%d", i), 10_000)
			if err == nil {
				r.Release()
			}
			errs[i], late[i] = err, ctx.Err() != nil
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case late[i]:
			t.Errorf("reservation %d waited past its deadline of %v for the hung database (%v)", i, 4*writeTimeout, err)
		case err != nil && !errors.Is(err, ErrHoldSpent):
			t.Errorf("reservation %d: %v, want the outage's refusal", i, err)
		}
	}
}
