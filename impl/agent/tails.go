package agent

import (
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
)

// TailsRetryAfter is the Retry-After of a live tail refused because its account holds
// agents.max_live_tails already (Follow): a tail ends when its client leaves, so a slot is
// soon free when one was closed.
const TailsRetryAfter = 5 * time.Second

// liveTails counts the live tails of each account in this process (Follow).
type liveTails struct {
	mu sync.Mutex
	n  map[uuid.UUID]int
}

// Follow takes one of the caller's account's live tails, for a caller about to follow a
// session's events as they come: the events stream (GET /v1/agents/{slot}/events), the web
// console's live view of a session, and tail_agent_session while it waits for events. Each
// holds a connection (and a database read at every wake-up) for as long as it lives, so an
// account holds at most agents.max_live_tails of them at once in each gateway process: beyond
// that Follow takes none and answers a 429 (KindRateLimited, Retry-After TailsRetryAfter)
// that says so. release gives the tail back; the caller defers it, so that it runs when the
// client leaves, the session ends or the gateway ends the stream. Calling it again does
// nothing. ErrNotFound for a principal without an account.
func (s *Service) Follow(p auth.Principal) (release func(), err error) {
	acct, err := tenantOf(p)
	if err != nil {
		return nil, err
	}
	limit := s.cfg.MaxLiveTails
	t := &s.tails
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n[acct] >= limit {
		return nil, &apierror.Error{Kind: apierror.KindRateLimited, RetryAfter: TailsRetryAfter, Message: fmt.Sprintf(
			"this account follows %d agent sessions live already, the most it may at once (agents.max_live_tails): close one of its tails (an events stream, a console page following a session, a waiting tail_agent_session) or retry in %d seconds",
			t.n[acct], apierror.Seconds(TailsRetryAfter))}
	}
	if t.n == nil {
		t.n = map[uuid.UUID]int{}
	}
	t.n[acct]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.n[acct]--; t.n[acct] <= 0 {
				delete(t.n, acct)
			}
		})
	}, nil
}

// LiveTails is how many live tails the account holds in this process (Follow).
func (s *Service) LiveTails(account uuid.UUID) int {
	s.tails.mu.Lock()
	defer s.tails.mu.Unlock()
	return s.tails.n[account]
}
