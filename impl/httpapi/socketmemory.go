package httpapi

import (
	"sync"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/metrics"
)

// socketMemory bounds what the Responses WebSockets of a process remember for
// previous_response_id, all sockets together, and what the sockets of one account do: a socket
// costs its client nothing while it remembers (a "generate": false warmup is free), so without a
// bound across sockets one tenant with many of them could hold any amount of the process's
// memory. It is half the body budget (the bodies it remembers were request bodies), and one
// account may hold a quarter of it. A socket that cannot take room for a response forgets its
// own oldest ones first, and if that is not enough it does not remember the response: the next
// request naming it gets previous_response_not_found and resends the whole input, as Codex does.
type socketMemory struct {
	mu sync.Mutex
	accountShares
	// forgotten counts the responses not remembered for want of room.
	forgotten int64
}

// newSocketMemory returns the pool for a body budget of budget bytes; nil (the sockets' own
// bounds only) when there is no budget.
func newSocketMemory(budget int64) *socketMemory {
	if budget <= 0 {
		return nil
	}
	limit := budget / 2
	return &socketMemory{accountShares: newAccountShares(limit, limit/4)}
}

// take takes n bytes for account; it reports whether they were taken.
func (m *socketMemory) take(account uuid.UUID, n int64) bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.accountShares.take(account, n)
}

// put gives back n bytes of account's.
func (m *socketMemory) put(account uuid.UUID, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accountShares.put(account, n)
}

// noteForgotten counts a response not remembered for want of room.
func (m *socketMemory) noteForgotten() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.forgotten++
	m.mu.Unlock()
}

// stats is what the pool holds, for the metrics.
func (m *socketMemory) stats() metrics.SocketMemoryStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return metrics.SocketMemoryStats{LimitBytes: m.limit, InUseBytes: m.used, Forgotten: m.forgotten}
}
