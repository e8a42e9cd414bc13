package agent

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// channelEvents is the notification channel of agent events ('<session id>:<seq>'), notified
// by the trigger of agent_events when the inserting transaction commits.
const channelEvents = "tollgate_agent_events"

// waiters are the open Wait channels by session.
type waiters struct {
	mu sync.Mutex
	m  map[uuid.UUID][]*waiter
}

type waiter struct {
	after int64
	ch    chan struct{}
	once  sync.Once
}

func (w *waiter) wake() { w.once.Do(func() { close(w.ch) }) }

func (ws *waiters) add(id uuid.UUID, w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[uuid.UUID][]*waiter{}
	}
	ws.m[id] = append(ws.m[id], w)
}

func (ws *waiters) remove(id uuid.UUID, w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	list := ws.m[id]
	for i, x := range list {
		if x == w {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(ws.m, id)
	} else {
		ws.m[id] = list
	}
}

// notify wakes the session's waiters for events before seq.
func (ws *waiters) notify(id uuid.UUID, seq int64) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	keep := ws.m[id][:0]
	for _, w := range ws.m[id] {
		if seq > w.after {
			w.wake()
		} else {
			keep = append(keep, w)
		}
	}
	if len(keep) == 0 {
		delete(ws.m, id)
	} else {
		ws.m[id] = keep
	}
}

// wakeAll wakes every waiter: after the listener reconnected, anything may have been missed.
func (ws *waiters) wakeAll() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, list := range ws.m {
		for _, w := range list {
			w.wake()
		}
	}
	ws.m = nil
}

// Wait returns a channel closed when the session has an event after afterSeq, fed by
// LISTEN/NOTIFY (so by any process's steps), or when ctx ends. It may also close when
// notifications were interrupted: the caller reads the events again either way. The session is
// not checked against a caller: read it first with Events or Tail. The waiter is dropped when
// ctx ends, so give a context that ends (the request's).
func (s *Service) Wait(ctx context.Context, sessionID string, afterSeq int64) <-chan struct{} {
	w := &waiter{after: afterSeq, ch: make(chan struct{})}
	id, err := uuid.Parse(sessionID)
	if err != nil {
		w.wake()
		return w.ch
	}
	s.waiters.add(id, w)
	context.AfterFunc(ctx, func() {
		s.waiters.remove(id, w)
		w.wake()
	})
	// An event committed before the waiter was registered wakes it now.
	if last, err := s.q.LastAgentEventSeq(ctx, id); err != nil || last > afterSeq {
		w.wake()
	}
	return w.ch
}

// listen holds a LISTEN connection on channelEvents until ctx ends, reconnecting when it is
// lost, and wakes the waiters of each notified session. A loss is logged once, as a warning,
// and the return of the notifications once: the attempts between (every 2 s while the
// database is away) are logged at debug.
func (s *Service) listen(ctx context.Context) {
	backoff := 50 * time.Millisecond
	lost := false
	listening := func() {
		if lost {
			s.log.Info("agent: event notifications restored")
			lost = false
		}
	}
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, listening)
		if ctx.Err() != nil {
			return
		}
		if lost {
			s.log.Debug("agent: event notifications still lost; reconnecting", "err", err)
		} else {
			s.log.Warn("agent: event notifications lost; reconnecting", "err", err)
			lost = true
		}
		s.waiters.wakeAll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// listenOnce listens on one connection until it fails, calling listening once it listens.
func (s *Service) listenOnce(ctx context.Context, listening func()) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pooled.Hijack() // a listening connection never goes back to the pool
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channelEvents); err != nil {
		return err
	}
	listening()
	s.waiters.wakeAll() // what happened before this connection listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		idText, seqText, ok := strings.Cut(n.Payload, ":")
		id, err1 := uuid.Parse(idText)
		seq, err2 := strconv.ParseInt(seqText, 10, 64)
		if ok && err1 == nil && err2 == nil {
			s.waiters.notify(id, seq)
		}
	}
}
