package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

// What happens to a session whose jobs keep failing. A step job has config
// agents.step_attempts attempts (River's MaxAttempts); when its last attempt fails, Work fails
// the session (failed, error) with an error event, in one transaction with the job's
// completion. What River discards all the same — a job whose process died on its last attempt
// (River's rescuer discards it without running it again), a last attempt cut by the job
// timeout, or one whose giving up could not be written — the sweep finds among River's
// discarded jobs and ends the same way, so that no session stays busy for ever.

// giveUpTimeout bounds the transaction that fails a session after its step's last attempt.
const giveUpTimeout = 10 * time.Second

// sweepBatch is how many discarded jobs one sweep reads.
const sweepBatch = 100

// Work runs one attempt of the step; on the last attempt, a failure ends the session (failed,
// error) rather than leaving it busy. An attempt cut short because the process is stopping is
// not a failure: River gives it back and the step runs again, on any process.
func (w *stepWorker) Work(ctx context.Context, job *river.Job[stepArgs]) (err error) {
	ctx, span := startStep(ctx, job.JobRow, job.Args)
	defer func() { endSpan(span, err) }()
	defer func() {
		if v := recover(); v != nil {
			w.s.log.Error("agent: a step panicked", "session", job.Args.SessionID, "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("agent: the step panicked: %v", v)
		}
		if err == nil || job.Attempt < job.MaxAttempts {
			return
		}
		if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return // the process is stopping (River's stop cancels with its own cause)
		}
		err = w.s.giveUp(ctx, job, err)
	}()
	return w.work(ctx, job)
}

// giveUp fails the session of a step whose last attempt failed with err, and completes the
// job, in one transaction; when that cannot be written it returns err (River discards the job,
// and the sweep ends the session).
func (s *Service) giveUp(ctx context.Context, job *river.Job[stepArgs], err error) error {
	s.log.Error("agent: a step failed on its last attempt; the session fails", "session", job.Args.SessionID,
		"step", job.Args.Step, "attempts", job.Attempt, "err", err)
	return s.failSession(ctx, job, err)
}

// failSession fails the session of the step with err's public text, and completes the job, in
// one transaction; when that cannot be written it returns err.
func (s *Service) failSession(ctx context.Context, job *river.Job[stepArgs], err error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveUpTimeout)
	defer cancel()
	text := publicText(err)
	if ferr := s.finishStep(wctx, job, func(st *sessionTx) error { return fail(st, text) }); ferr != nil {
		s.log.Error("agent: failing the session failed; the sweep of discarded jobs will", "session", job.Args.SessionID, "err", ferr)
		return err
	}
	return nil
}

// fail ends a live session failed (error), with an error event carrying text.
func fail(st *sessionTx, text string) error {
	if err := st.event("error", map[string]any{"text": text}); err != nil {
		return err
	}
	return st.end(StateFailed, ReasonError)
}

// publicText is what the session's event log says of a failure: the message of a refusal or
// an upstream failure (as the route would answer it), never internal error text.
func publicText(err error) string {
	if ae := apierror.As(err); ae != nil {
		return ae.Message
	}
	if store.Unavailable(err) {
		return "the database is unavailable"
	}
	return "internal error"
}

// sweepDiscarded ends the sessions whose jobs River has discarded (sweep; one sweep of Run's,
// every config agents.approval_sweep).
func (s *Service) sweepDiscarded(ctx context.Context) {
	if n, err := s.sweep(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("agent: sweeping discarded jobs failed", "err", err)
	} else if n > 0 {
		s.log.Warn("agent: sessions ended after River discarded their jobs", "count", n)
	}
}

// sweep takes River's discarded start, step and stop jobs, each in a transaction that deletes
// the job (so that every discarded job is handled once, by one process) and ends its session
// when the job was what the session waited for: a step job of a busy or stopping session at
// that step, or a start job of a provisioning session, fails it (error, with an error event);
// a stop job that was to finish a stopping session finishes it (stopped). It returns how many
// sessions it ended.
func (s *Service) sweep(ctx context.Context) (int, error) {
	list, err := s.river.JobList(ctx, river.NewJobListParams().
		Kinds(stepArgs{}.Kind(), startArgs{}.Kind(), stopArgs{}.Kind()).
		States(rivertype.JobStateDiscarded).First(sweepBatch))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range list.Jobs {
		ended, err := s.sweepJob(ctx, j)
		if err != nil {
			return n, err
		}
		if ended {
			n++
		}
	}
	return n, nil
}

// sweepJob handles one discarded job (see sweep).
func (s *Service) sweepJob(ctx context.Context, j *rivertype.JobRow) (bool, error) {
	var args struct {
		stepArgs
		Finish bool `json:"finish"`
	}
	if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
		return false, fmt.Errorf("agent: discarded job %d: %w", j.ID, err)
	}
	ended := false
	err := s.inTx(ctx, func(tx *store.AgentTx) error {
		if _, err := s.river.JobDeleteTx(ctx, tx.Tx(), j.ID); errors.Is(err, rivertype.ErrNotFound) {
			return nil // another process took it
		} else if err != nil {
			return err
		}
		st, err := lockSession(ctx, tx, args.SessionID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		r := st.row
		switch {
		case j.Kind == stepArgs{}.Kind() && r.Step == args.Step && (r.State == StateBusy || r.State == StateStopping),
			j.Kind == startArgs{}.Kind() && r.State == StateProvisioning:
			err = fail(st, fmt.Sprintf("the %s failed %d times", jobNoun(j.Kind), j.Attempt))
		case j.Kind == stopArgs{}.Kind() && args.Finish && r.State == StateStopping:
			err = st.end(StateStopped, "")
		default:
			return nil
		}
		if err != nil {
			return err
		}
		ended = true
		s.log.Error("agent: River discarded a job; its session ended", "session", r.ID, "job", j.ID, "kind", j.Kind,
			"attempts", j.Attempt, "errors", j.Errors)
		return st.save()
	})
	return ended && err == nil, err
}

// jobNoun names a job kind in an error event.
func jobNoun(kind string) string {
	if kind == (startArgs{}).Kind() {
		return "start of the session"
	}
	return "step"
}
