package agent

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/tollgate/tollgate/impl/store"
)

// The River jobs of the agents. Each job's effects commit in one transaction with the job's
// completion (JobCompleteTx) and the jobs it inserts (InsertTx).

// startArgs provisions a session: provisioning → ready, then busy when a message waits.
type startArgs struct {
	SessionID uuid.UUID `json:"session_id"`
	CommandID uuid.UUID `json:"command_id,omitempty"`
}

func (startArgs) Kind() string { return "agent_start" }

// stepArgs runs one step of a session; it is unique per (session, step).
type stepArgs struct {
	SessionID uuid.UUID `json:"session_id"`
	Step      int64     `json:"step"`
}

func (stepArgs) Kind() string { return "agent_step" }

// stopArgs ends a session that was ready (Finish) or lets the step in flight end it.
type stopArgs struct {
	SessionID uuid.UUID `json:"session_id"`
	CommandID uuid.UUID `json:"command_id,omitempty"`
	Finish    bool      `json:"finish"`
}

func (stopArgs) Kind() string { return "agent_stop" }

// deadlineArgs ends a session at its max_duration, scheduled when it becomes ready.
type deadlineArgs struct {
	SessionID uuid.UUID `json:"session_id"`
}

func (deadlineArgs) Kind() string { return "agent_deadline" }

// actionArgs runs an approved action.
type actionArgs struct {
	ApprovalID uuid.UUID `json:"approval_id"`
}

func (actionArgs) Kind() string { return "agent_action" }

// jobAttempts is River's bound on the attempts of the agents' jobs other than steps (start,
// stop, deadline, approved actions: database work only, retried through a database outage of
// a few minutes: the waits add up to 300 s). A step job has config agents.step_attempts (see
// attempts): its last failed attempt fails the session (stepWorker.Work), and a job River
// discards all the same (a process that died on the last attempt) is swept (sweepDiscarded).
const jobAttempts = 25

// attempts is the explicit MaxAttempts of a job of the agents.
func (s *Service) attempts(args river.JobArgs) int {
	if _, ok := args.(stepArgs); ok {
		return s.cfg.StepAttempts
	}
	return jobAttempts
}

// retryDelay is the wait before a failed job runs again: a second per attempt so far.
func retryDelay(attempt int) time.Time { return time.Now().Add(time.Duration(attempt) * time.Second) }

// newRiver builds the River client with the agents' workers; it starts nothing.
func (s *Service) newRiver() (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &startWorker{s: s})
	river.AddWorker(workers, &stepWorker{s: s})
	river.AddWorker(workers, &stopWorker{s: s})
	river.AddWorker(workers, &deadlineWorker{s: s})
	river.AddWorker(workers, &actionWorker{s: s})
	return river.NewClient(riverpgxv5.New(s.pool), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.cfg.Workers}},
		Workers:              workers,
		JobTimeout:           s.cfg.JobTimeout,
		RescueStuckJobsAfter: s.cfg.RescueAfter,
		MaxAttempts:          jobAttempts,
		Logger:               s.riverLog,
		// Every job is counted while it runs (Working).
		Middleware: []rivertype.Middleware{river.WorkerMiddlewareFunc(
			func(ctx context.Context, _ *rivertype.JobRow, doInner func(context.Context) error) error {
				s.working.Add(1)
				defer s.working.Add(-1)
				return doInner(ctx)
			})},
	})
}

// complete marks the job completed in tx.
func complete[T river.JobArgs](ctx context.Context, tx *store.AgentTx, job *river.Job[T]) error {
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx.Tx(), job)
	return err
}

// insert inserts a job in tx, with its explicit MaxAttempts.
func (s *Service) insert(ctx context.Context, tx *store.AgentTx, args river.JobArgs, opts *river.InsertOpts) error {
	o := river.InsertOpts{}
	if opts != nil {
		o = *opts
	}
	o.MaxAttempts = s.attempts(args)
	_, err := s.river.InsertTx(ctx, tx.Tx(), args, &o)
	return err
}

// enqueueStep advances the session's step number and inserts its step job.
func (s *Service) enqueueStep(st *sessionTx) error {
	st.row.Step++
	return s.insert(st.ctx, st.tx, stepArgs{SessionID: st.row.ID, Step: st.row.Step},
		&river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}, Metadata: jobMetadata(st.ctx, st.row.TraceParent)})
}

// kick makes a ready session busy when a message waits for it.
func (s *Service) kick(st *sessionTx) error {
	queued, err := st.tx.ListQueuedAgentMessages(st.ctx, st.row.ID)
	if err != nil || len(queued) == 0 {
		return err
	}
	if err := st.move(StateBusy, ""); err != nil {
		return err
	}
	return s.enqueueStep(st)
}

// withSession runs fn on the job's session, locked, then saves it and completes the job, in
// one transaction. A session that no longer exists completes the job with nothing to do.
func withSession[T river.JobArgs](ctx context.Context, s *Service, job *river.Job[T], id uuid.UUID, fn func(st *sessionTx) error) error {
	return s.inTx(ctx, func(tx *store.AgentTx) error {
		st, err := lockSession(ctx, tx, id)
		if errors.Is(err, ErrNotFound) {
			return complete(ctx, tx, job)
		}
		if err != nil {
			return err
		}
		if err := fn(st); err != nil {
			return err
		}
		if err := st.save(); err != nil {
			return err
		}
		return complete(ctx, tx, job)
	})
}

// setCommand moves a command (none: uuid.Nil) through statuses, in order.
func setCommand(st *sessionTx, id uuid.UUID, statuses ...string) error {
	if id == uuid.Nil {
		return nil
	}
	for _, status := range statuses {
		if err := st.tx.SetAgentCommandStatus(st.ctx, id, status); err != nil {
			return err
		}
	}
	return nil
}

type startWorker struct {
	river.WorkerDefaults[startArgs]
	s *Service
}

func (w *startWorker) NextRetry(job *river.Job[startArgs]) time.Time { return retryDelay(job.Attempt) }

func (w *startWorker) Work(ctx context.Context, job *river.Job[startArgs]) error {
	s := w.s
	return withSession(ctx, s, job, job.Args.SessionID, func(st *sessionTx) error {
		if err := setCommand(st, job.Args.CommandID, CommandRunning, CommandDone); err != nil {
			return err
		}
		if st.row.State != StateProvisioning {
			return nil // stopped before it started
		}
		if err := st.move(StateReady, ""); err != nil {
			return err
		}
		if err := s.insert(ctx, st.tx, deadlineArgs{SessionID: st.row.ID}, &river.InsertOpts{ScheduledAt: deadline(st.row)}); err != nil {
			return err
		}
		return s.kick(st)
	})
}

type stopWorker struct {
	river.WorkerDefaults[stopArgs]
	s *Service
}

func (w *stopWorker) NextRetry(job *river.Job[stopArgs]) time.Time { return retryDelay(job.Attempt) }

func (w *stopWorker) Work(ctx context.Context, job *river.Job[stopArgs]) error {
	return withSession(ctx, w.s, job, job.Args.SessionID, func(st *sessionTx) error {
		// A session that has ended ended its stop commands with it (sessionTx.move: done when
		// stopped by the user, failed when it ended for another cause first): this one is not
		// taken up again.
		if !live(st.row.State) {
			return nil
		}
		// The command runs until the session has ended: at once for a session that was ready,
		// at the step boundary for a busy one (sessionTx.move ends it).
		if err := setCommand(st, job.Args.CommandID, CommandRunning); err != nil {
			return err
		}
		if job.Args.Finish && st.row.State == StateStopping {
			return st.end(StateStopped, "")
		}
		return nil
	})
}

type deadlineWorker struct {
	river.WorkerDefaults[deadlineArgs]
	s *Service
}

func (w *deadlineWorker) NextRetry(job *river.Job[deadlineArgs]) time.Time {
	return retryDelay(job.Attempt)
}

func (w *deadlineWorker) Work(ctx context.Context, job *river.Job[deadlineArgs]) error {
	return withSession(ctx, w.s, job, job.Args.SessionID, func(st *sessionTx) error {
		switch st.row.State {
		case StateReady:
			return st.end(StateStopped, ReasonMaxDuration)
		case StateBusy:
			return st.move(StateStopping, ReasonMaxDuration) // the step in flight ends it
		}
		return nil
	})
}
