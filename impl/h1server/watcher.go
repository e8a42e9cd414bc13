package h1server

import (
	"errors"
	"os"
	"time"
)

// watchState is where a connection's watcher stands. The watcher notices a client that closes
// its connection while the handler still runs, and cancels the request's context. net/http
// starts such a read for every request; here it starts only for requests that are still running
// after Server.WatchDelay, and only once their body was read to the end (before that the handler
// itself reads the connection, and a read error there cancels the context too). A quick request
// costs one timer reset and stop and an uncontended lock, and no goroutine.
type watchState uint8

const (
	watchIdle     watchState = iota // no request, or it needs no watching
	watchArmed                      // the request runs and the timer is pending
	watchWaitBody                   // the timer fired; the watcher starts when the body reaches its end
	watchRunning                    // the watcher reads the connection
	watchStopping                   // the request ended; the watcher is being interrupted
	watchExited                     // the watcher returned by itself (it read data, or failed)
)

// armWatch starts the timer for a request; bodyRead tells whether its body is already complete
// (it has none).
func (c *conn) armWatch(bodyRead bool) {
	d := c.srv.watchDelay()
	if d < 0 {
		return
	}
	c.wmu.Lock()
	c.wstate = watchArmed
	c.bodyEOF = bodyRead
	c.wmu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.watchTimerFired)
	} else {
		c.timer.Reset(d)
	}
}

// watchTimerFired runs in the timer's own goroutine, which becomes the watcher when the body has
// been read already.
func (c *conn) watchTimerFired() {
	c.wmu.Lock()
	if c.skipFires > 0 {
		// The timer of an earlier request fired as it was being stopped.
		c.skipFires--
		c.wmu.Unlock()
		return
	}
	if c.wstate != watchArmed {
		c.wmu.Unlock()
		return
	}
	if !c.bodyEOF {
		c.wstate = watchWaitBody
		c.wmu.Unlock()
		return
	}
	c.wstate = watchRunning
	c.wmu.Unlock()
	c.watch()
}

// bodyDone is called by the request body when it reaches its end, and starts the watcher if the
// timer has fired already.
func (c *conn) bodyDone() {
	c.wmu.Lock()
	c.bodyEOF = true
	start := c.wstate == watchWaitBody
	if start {
		c.wstate = watchRunning
	}
	c.wmu.Unlock()
	if start {
		go c.watch()
	}
}

// watch reads the connection until the client sends something or goes away, or until
// disarmWatch interrupts the read with a past deadline. The handler has finished reading the
// body, so the read buffer is the watcher's until it returns: whatever it reads is kept there
// as the start of the next, pipelined request. A failed read (other than the interruption)
// cancels the request's context and ends the connection after the response, as in net/http.
func (c *conn) watch() {
	c.wmu.Lock()
	if c.wstate != watchRunning { // stopped before it began
		c.exitWatchLocked()
		c.wmu.Unlock()
		return
	}
	b := &c.bufs.rbuf
	if c.r == c.w {
		c.r, c.w = 0, 0
	} else if c.w == len(b) && c.r > 0 {
		c.w = copy(b[:], b[c.r:c.w])
		c.r = 0
	}
	if c.w == len(b) { // the buffer is full of the next requests already
		c.exitWatchLocked()
		c.wmu.Unlock()
		return
	}
	// Under the lock, so that disarmWatch's past deadline always comes after this one.
	if !c.userRDL {
		_ = c.rwc.SetReadDeadline(c.bodyDL)
	}
	hook := c.srv.testHookWatch
	c.wmu.Unlock()

	if hook != nil {
		hook("start")
	}
	n, err := c.rwc.Read(b[c.w:])

	c.wmu.Lock()
	c.w += n
	if n == 0 && err != nil && (c.wstate != watchStopping || !errors.Is(err, os.ErrDeadlineExceeded)) {
		if c.rerr == nil {
			c.rerr = err
		}
		c.cancelReq()
	}
	c.exitWatchLocked()
	c.wmu.Unlock()
	if hook != nil {
		hook("end")
	}
}

func (c *conn) exitWatchLocked() {
	if c.wstate == watchStopping {
		c.watchDone <- struct{}{}
	}
	c.wstate = watchExited
}

// disarmWatch ends the watch when the request ends: it stops a pending timer, or interrupts a
// running watcher with a past read deadline and waits for it (net/http's abortPendingRead, paid
// here only by requests that ran longer than the delay).
func (c *conn) disarmWatch() {
	if c.timer == nil {
		return
	}
	c.wmu.Lock()
	switch c.wstate {
	case watchArmed:
		if !c.timer.Stop() {
			c.skipFires++
		}
	case watchRunning:
		c.wstate = watchStopping
		if c.watchDone == nil {
			c.watchDone = make(chan struct{}, 1)
		}
		_ = c.rwc.SetReadDeadline(aLongTimeAgo)
		c.wmu.Unlock()
		<-c.watchDone
		c.wmu.Lock()
		c.rdlKnown = false
	case watchExited:
		c.rdlKnown = false
	}
	c.wstate = watchIdle
	c.bodyEOF = false
	c.wmu.Unlock()
}
