package dataset

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// killGrace is how long past its statement timeout a query may run before its engine process is
// killed: an interruptible query has answered its timeout by then, so that only a query that
// ignores interrupts (trial s16h3: strpos, contains, a LIKE of 2,000 '%a') costs its dataset's
// process.
const killGrace = 2 * time.Second

// engineProcess is the gateway's handle on one engine process: a child process running this
// same binary (see init in child.go) that holds one dataset's DuckDB database and runs every
// statement on it, so that the gateway's own process never runs a tenant's SQL. The child's
// memory is bounded by the kernel (RLIMIT_DATA, engineConfig.processBytes) and it is killed when
// a query outlives its timeout by killGrace; either way only the child dies, and the dataset is
// materialized again in a new one on its next use.
type engineProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	bound int64 // the child's memory bound in bytes

	table   string
	columns []Column
	rows    int64
	bytes   int64 // the child's resident memory after the load

	// slots are the child's database connections: a query holds one while it runs.
	slots chan struct{}

	wmu sync.Mutex // serializes writes to stdin

	mu         sync.Mutex
	next       uint64
	pending    map[uint64]chan engineResponse
	killReason string // why the parent killed the child, if it did
	malformed  string // what was wrong with an answer that was not the protocol's, if one was

	dead   chan struct{} // closed once the child has exited and been waited for
	state  *os.ProcessState
	stderr *tailBuffer
}

// tailBuffer keeps the last bytes written to it: what the child said on stderr before dying.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailBytes = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// errEngineGone is the internal error of a request whose engine process exited first.
var errEngineGone = errors.New("the dataset engine process exited")

// spawnEngine starts an engine process bounded to cfg.processBytes of memory. Its environment
// is the engine's variable alone (and TZ, so that times print as in the gateway): nothing of
// the gateway's environment, its database address say, is in reach of the engine; nor is any
// descriptor of the gateway's but its three pipes (keepDescriptorsFromEngines).
func spawnEngine(cfg engineConfig) (*engineProcess, error) {
	exe, err := engineExecutable()
	if err != nil {
		return nil, fmt.Errorf("dataset engine: find the executable: %w", err)
	}
	cmd := exec.Command(exe)
	bound := cfg.processBytes
	if bound > 0 {
		bound += raceAllowance
	}
	cmd.Env = []string{engineEnv + "=" + strconv.FormatInt(bound, 10)}
	if tz, ok := os.LookupEnv("TZ"); ok {
		cmd.Env = append(cmd.Env, "TZ="+tz)
	}
	cmd.SysProcAttr = engineProcAttr()
	keepDescriptorsFromEngines()
	p := &engineProcess{
		cmd:     cmd,
		bound:   cfg.processBytes,
		slots:   make(chan struct{}, max(cfg.conns, 1)),
		pending: map[uint64]chan engineResponse{},
		dead:    make(chan struct{}),
		stderr:  &tailBuffer{},
	}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("dataset engine: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("dataset engine: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dataset engine: start: %w", err)
	}
	go p.readResponses(bufio.NewReader(stdout))
	return p, nil
}

// readResponses hands each response to its request until the child's stdout ends, then waits
// for the child and fails what is still pending.
func (p *engineProcess) readResponses(r io.Reader) {
	for {
		var resp engineResponse
		if err := readFrame(r, &resp); err != nil {
			if errors.Is(err, errMalformedFrame) {
				p.misbehaved(err.Error())
			}
			break
		}
		p.mu.Lock()
		ch := p.pending[resp.ID]
		delete(p.pending, resp.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
	// A child whose output ended, or was not the protocol's, is not trusted any further.
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.state = p.cmd.ProcessState
	p.mu.Unlock()
	close(p.dead)
}

// send sends a request and returns the channel its response will arrive on (nil for a cancel).
func (p *engineProcess) send(req engineRequest) (uint64, <-chan engineResponse, error) {
	var ch chan engineResponse
	p.mu.Lock()
	p.next++
	req.ID = p.next
	if req.Op != opCancel && req.Op != opClose {
		ch = make(chan engineResponse, 1)
		p.pending[req.ID] = ch
	}
	p.mu.Unlock()
	p.wmu.Lock()
	err := writeFrame(p.stdin, req)
	p.wmu.Unlock()
	if err != nil {
		p.mu.Lock()
		delete(p.pending, req.ID)
		p.mu.Unlock()
		return 0, nil, errEngineGone
	}
	return req.ID, ch, nil
}

// call sends a request and waits for its response, at most until ctx is done (then the child,
// in an unknown state, is killed).
func (p *engineProcess) call(ctx context.Context, req engineRequest) (engineResponse, error) {
	_, ch, err := p.send(req)
	if err != nil {
		return engineResponse{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-p.dead:
		return engineResponse{}, errEngineGone
	case <-ctx.Done():
		p.kill("the " + req.Op + " was cancelled")
		return engineResponse{}, ctx.Err()
	}
}

// kill ends the child at once (SIGKILL), saying why for the requests it fails.
func (p *engineProcess) kill(reason string) {
	p.mu.Lock()
	if p.killReason == "" {
		p.killReason = reason
	}
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
}

// reasonMalformed is why the parent kills a child whose answer is not the protocol's: a frame
// that does not read (its head announcing more than maxFrame, bytes that are not the JSON of a
// response) or a response without the answer its request asked for. The child's state is then
// unknown (stray output on the protocol's descriptor, a fault), and it is not trusted further.
const reasonMalformed = "it answered with something that is not the engine's protocol"

// misbehaved kills the child for an answer that is not the protocol's (detail says what), so
// that every request pending on it fails with reasonMalformed, and the entry holding it is
// dropped by the query that notices.
func (p *engineProcess) misbehaved(detail string) {
	p.mu.Lock()
	if p.malformed == "" {
		p.malformed = detail
	}
	p.mu.Unlock()
	p.kill(reasonMalformed)
}

// malformedAnswer says what was wrong with the child's answer that was not the protocol's, or
// is "" when none was.
func (p *engineProcess) malformedAnswer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.malformed
}

// Close ends the child: it is asked to exit and its stdin closes, on which it exits too, and it
// is killed if it has not within a second. It does not wait.
func (p *engineProcess) Close() error {
	_, _, _ = p.send(engineRequest{Op: opClose})
	_ = p.stdin.Close()
	go func() {
		select {
		case <-p.dead:
		case <-time.After(time.Second):
			p.kill("closed")
		}
	}()
	return nil
}

// wait waits until the child has exited, at most d.
func (p *engineProcess) wait(d time.Duration) {
	select {
	case <-p.dead:
	case <-time.After(d):
	}
}

// startEngine starts an engine process and loads spec's file into its database (openDuck, in
// the child). On success, the returned options hold the dataset's spelling of the columns. A
// load that outlives ctx kills the child.
func startEngine(ctx context.Context, cfg engineConfig, spec loadSpec) (*engineProcess, LoadOptions, error) {
	p, err := spawnEngine(cfg)
	if err != nil {
		return nil, spec.opts, err
	}
	r, err := p.call(ctx, engineRequest{Op: opLoad, Load: &engineLoad{
		Path: spec.path, Format: spec.format, Name: spec.name, Options: spec.opts,
		Threads: cfg.threads, MemoryLimit: cfg.memoryLimit, Conns: cfg.conns,
	}})
	if err == nil && r.Err != nil {
		err = r.Err.err()
	}
	if err == nil && r.Options == nil {
		p.misbehaved("a load answered without its options")
		err = errEngineGone
	}
	if errors.Is(err, errEngineGone) {
		err = p.gone("loading dataset '" + spec.name + "'")
	}
	if err != nil {
		p.kill("the load failed")
		p.wait(time.Second)
		opts := spec.opts
		if r.Options != nil {
			opts = *r.Options
		}
		return nil, opts, err
	}
	p.table, p.columns, p.rows, p.bytes = spec.name, r.Columns, r.Rows, r.Bytes
	return p, *r.Options, nil
}

// gone is the caller's error for work (what: "the query", "loading dataset 'x'") that the
// child's exit cut short: killed by the parent (its reason), out of its memory bound (its
// stderr says so, or the kernel killed it), or another failure.
func (p *engineProcess) gone(what string) error {
	<-p.dead
	p.mu.Lock()
	reason, state := p.killReason, p.state
	p.mu.Unlock()
	if reason != "" {
		return userErr(CodeFailed, "%s was stopped: the dataset's engine was stopped because %s; retry", what, reason)
	}
	tail := strings.ToLower(p.stderr.String())
	signaled := false
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		signaled = true // not by the parent: the kernel's out-of-memory killer
	}
	if signaled || strings.Contains(tail, "out of memory") || strings.Contains(tail, "bad_alloc") || strings.Contains(tail, "cannot allocate") {
		return userErr(CodeFailed, "%s ran out of memory: it needed more than the dataset engine's bound of %d MiB, and the engine was stopped (the dataset is loaded again on the next query)", what, p.bound>>20)
	}
	return userErr(CodeFailed, "%s stopped the dataset's engine (%s); the dataset is loaded again on the next query", what, state)
}

// query runs one checked SELECT in the child within lim. Past the statement timeout plus
// killGrace the child is killed and the caller gets the timeout's error; if the caller's ctx
// ends first, the child is asked to interrupt the query and killed if it has not answered by
// that same deadline.
func (p *engineProcess) query(ctx context.Context, stmt string, lim queryLimits) (QueryResult, error) {
	qctx, cancel := context.WithTimeout(ctx, lim.timeout)
	defer cancel()
	timedOut := func() error {
		return userErr(CodeTimeout, "the query was cancelled: it ran longer than the %s statement timeout", lim.timeout)
	}
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-qctx.Done():
		if ctx.Err() != nil {
			return QueryResult{}, ctx.Err()
		}
		return QueryResult{}, userErr(CodeTimeout, "the dataset is busy: other queries of the account held every one of its connections for the whole %s statement timeout; retry when they end", lim.timeout)
	}
	deadline, _ := qctx.Deadline()
	id, ch, err := p.send(engineRequest{Op: opQuery, Query: &engineQuery{Statement: stmt, Timeout: lim.timeout, Rows: lim.rows, Bytes: lim.bytes}})
	if err != nil {
		return QueryResult{}, p.gone("the query")
	}
	kill := time.NewTimer(time.Until(deadline) + killGrace)
	defer kill.Stop()
	select {
	case r := <-ch:
		if r.Err != nil {
			return QueryResult{}, r.Err.err()
		}
		res := r.Result
		if res == nil {
			p.misbehaved("a query answered without its result")
			return QueryResult{}, p.gone("the query")
		}
		return QueryResult{Text: string(res.Text), Columns: res.Columns, Rows: res.Rows, Truncated: res.Truncated, TruncatedBy: res.TruncatedBy}, nil
	case <-p.dead:
		return QueryResult{}, p.gone("the query")
	case <-kill.C:
		p.kill("a query ran past its statement timeout")
		p.wait(time.Second)
		return QueryResult{}, timedOut()
	case <-ctx.Done():
		_, _, _ = p.send(engineRequest{Op: opCancel, Cancel: id})
		go func() {
			select {
			case <-ch:
			case <-p.dead:
			case <-kill.C:
				p.kill("a cancelled query ran past its statement timeout")
			}
		}()
		return QueryResult{}, ctx.Err()
	}
}

// healthy reports whether the child still answers a query of its table (see duck.healthy): a
// child that has exited, or that does not answer the probe in time, is not.
func (p *engineProcess) healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second+killGrace)
	defer cancel()
	_, ch, err := p.send(engineRequest{Op: opHealthy})
	if err != nil {
		return false
	}
	select {
	case r := <-ch:
		return r.Healthy
	case <-p.dead:
		return false
	case <-ctx.Done():
		return false
	}
}

// alive reports whether the child has not exited.
func (p *engineProcess) alive() bool {
	select {
	case <-p.dead:
		return false
	default:
		return true
	}
}

// describing holds a place for each DescribeFile running, the most the process runs at once:
// each is an engine process that may use the engine's whole memory bound, and the console's
// upload takes one account's uploads one at a time but every account's at once, so that
// several accounts uploading together started as many processes. A place is given back once
// the process has exited.
var describing = make(chan struct{}, maxDescribing)

// maxDescribing is how many DescribeFile calls run at once (as many as Options.MaxLoads'
// default); the others wait, at most until their context ends.
const maxDescribing = 2

// DescribeFile reads a local dataset file the way a load does and returns its columns, so that
// an operator (or the console's upload) can check a file before storing it; a CSV file must
// also be one table that DuckDB reads without working around faults (checkCSV). Errors name
// the file. The file is read in an engine process of its own, bounded as a dataset's is; at most
// maxDescribing run at once in a process, the others wait for a place.
func DescribeFile(ctx context.Context, path string, f Format) ([]Column, error) {
	if _, ok := ParseFormat(string(f)); !ok {
		return nil, fmt.Errorf("format %q is not one of csv, parquet, jsonl", f)
	}
	cfg := Options{}.withDefaults()
	select {
	case describing <- struct{}{}:
		defer func() { <-describing }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p, err := spawnEngine(engineConfig{threads: 1, memoryLimit: cfg.DatabaseMemoryLimit, conns: 1, processBytes: cfg.EngineMemoryBytes})
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close(); p.wait(2 * time.Second) }()
	r, err := p.call(ctx, engineRequest{Op: opDescribe, Load: &engineLoad{Path: path, Format: f, MemoryLimit: cfg.DatabaseMemoryLimit}})
	if errors.Is(err, errEngineGone) {
		<-p.dead
		return nil, fmt.Errorf("%s could not be read: the dataset engine stopped (%s)", path, p.state)
	}
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err.err()
	}
	if r.Columns == nil {
		p.misbehaved("a describe answered without its columns")
		return nil, fmt.Errorf("%s could not be read: the dataset engine answered without its columns", path)
	}
	return r.Columns, nil
}
