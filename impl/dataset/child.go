package dataset

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

// engineEnv is the environment variable that makes a process the dataset engine: its value is
// the hard memory bound, in bytes, that the engine process sets on itself before DuckDB starts.
// Only the parent (startEngine) sets it, in the child's environment alone.
const engineEnv = "TOLLGATE_DATASET_ENGINE"

// init turns this process into the dataset engine when its parent started it as one, before
// any other code of the binary runs: it serves the parent's requests on stdin and stdout and
// exits, never returning to main.
//
// An init function is used, unlike everywhere else in the project (where impl/ reads no
// environment), because it is the one hook that every binary linking this package runs: the
// gateway's main, and the test binaries of this package and of every package that uses it
// (mcp, tenanttools, httpapi...), which re-execute themselves (os.Executable) as the engine
// exactly as the gateway does. A function main had to call would leave the test binaries,
// whose main is generated, unable to serve as the engine.
func init() {
	v, ok := os.LookupEnv(engineEnv)
	if !ok {
		return
	}
	bound, err := strconv.ParseInt(v, 10, 64)
	if err != nil || bound < 0 {
		fmt.Fprintf(os.Stderr, "%s=%q is not a byte count\n", engineEnv, v)
		os.Exit(2)
	}
	proto, err := takeProtocolOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dataset engine: take the protocol's output: %v\n", err)
		os.Exit(2)
	}
	os.Exit(serveEngine(bound, os.Stdin, proto))
}

// The operations of the engine's protocol.
const (
	opLoad     = "load"     // load one dataset (engineLoad) into the process's database
	opDescribe = "describe" // DescribeFile of a local file (engineLoad's path and format)
	opQuery    = "query"    // run one checked SELECT (engineQuery)
	opCancel   = "cancel"   // interrupt the query of request id Cancel
	opHealthy  = "healthy"  // whether the database still answers a query of its table
	opClose    = "close"    // close the database and exit
)

// engineRequest is one request of the parent to an engine process. Requests and responses
// travel as frames (writeFrame) of JSON; a response has its request's ID, and requests of
// different IDs run concurrently.
type engineRequest struct {
	ID     uint64       `json:"id"`
	Op     string       `json:"op"`
	Load   *engineLoad  `json:"load,omitempty"`
	Query  *engineQuery `json:"query,omitempty"`
	Cancel uint64       `json:"cancel,omitempty"`
}

// engineLoad is what a load (or a describe) reads: the local file and the fixed load's inputs,
// which the engine turns into the one statement it runs (openDuck), and the engine's settings.
type engineLoad struct {
	Path        string      `json:"path"`
	Format      Format      `json:"format"`
	Name        string      `json:"name"`
	Options     LoadOptions `json:"options"`
	Threads     int         `json:"threads"`
	MemoryLimit int64       `json:"memory_limit"`
	Conns       int         `json:"conns"`
}

// engineQuery is one query: the checked statement (checkSelect's output) and its limits.
type engineQuery struct {
	Statement string        `json:"statement"`
	Timeout   time.Duration `json:"timeout"`
	Rows      int           `json:"rows"`
	Bytes     int           `json:"bytes"`
}

// engineResponse answers one request.
type engineResponse struct {
	ID uint64 `json:"id"`
	// Err is the request's failure: an *Error when Code is set, else an internal error.
	Err *engineError `json:"err,omitempty"`
	// A load's answer: the options as applied (the dataset's spelling of the columns), the
	// table's columns and rows, and what the process holds now (bytes).
	Options *LoadOptions `json:"options,omitempty"`
	Columns []Column     `json:"columns,omitempty"`
	Rows    int64        `json:"rows,omitempty"`
	Bytes   int64        `json:"bytes,omitempty"`
	// A query's answer; Text is bytes, so that it crosses exactly as rendered.
	Result *engineResult `json:"result,omitempty"`
	// A health probe's answer.
	Healthy bool `json:"healthy,omitempty"`
}

type engineError struct {
	Code Code   `json:"code,omitempty"`
	Msg  string `json:"msg"`
}

type engineResult struct {
	Text        []byte   `json:"text"`
	Columns     []Column `json:"columns"`
	Rows        int      `json:"rows"`
	Truncated   bool     `json:"truncated,omitempty"`
	TruncatedBy string   `json:"truncated_by,omitempty"`
}

// toEngineError carries err across the protocol: an *Error keeps its code and message.
func toEngineError(err error) *engineError {
	if err == nil {
		return nil
	}
	var ue *Error
	if errors.As(err, &ue) {
		return &engineError{Code: ue.Code, Msg: ue.Msg}
	}
	return &engineError{Msg: err.Error()}
}

// err turns a carried error back: an *Error when it has a code.
func (e *engineError) err() error {
	if e == nil {
		return nil
	}
	if e.Code != "" {
		return &Error{Code: e.Code, Msg: e.Msg}
	}
	return errors.New(e.Msg)
}

// maxFrame bounds one frame of the protocol: a result is at most Options.MaxResultBytes of text.
const maxFrame = 64 << 20

// frameChunk is the most of a frame's buffer allocated before its bytes have arrived: a frame's
// head may announce up to maxFrame, and a reader that believed it would hold that much for a
// head alone.
const frameChunk = 1 << 20

// errMalformedFrame is a frame that is not the protocol's: its head announces more than
// maxFrame, or its bytes are not the JSON of the expected message.
var errMalformedFrame = errors.New("a malformed frame")

// writeFrame writes v as one frame, in one Write: its JSON's length as four bytes, big-endian,
// then the JSON.
func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("a frame of %d bytes is larger than %d", len(b), maxFrame)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// readFrame reads one frame into v. The frame's buffer starts at most frameChunk large and grows
// with the bytes that arrive (to about twice them), so that a head announcing a large frame
// costs nothing until the frame is sent. A frame that is not the protocol's is an errMalformedFrame; one cut short, an
// io.ErrUnexpectedEOF.
func readFrame(r io.Reader, v any) error {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxFrame {
		return fmt.Errorf("%w: its head announces %d bytes, more than %d", errMalformedFrame, n, maxFrame)
	}
	var buf bytes.Buffer
	buf.Grow(int(min(n, frameChunk)))
	got, err := io.CopyN(&buf, r, int64(n))
	if err != nil {
		if errors.Is(err, io.EOF) && got < int64(n) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		return fmt.Errorf("%w: %v", errMalformedFrame, err)
	}
	return nil
}

// engineTestQueries are statements that the engine of this package's test binary answers by
// misbehaving as a broken or hostile engine might (writing to its standard output, answering
// with a malformed frame, hanging, exiting), so that the tests can check what the parent makes
// of it. It is nil in every other binary: only a _test.go file of this package fills it, in a
// package variable's initializer, which runs before init serves as the engine. A hook writes its
// frames, if any, to out (one Write per frame, serialized with the replies), under request id.
var engineTestQueries map[string]func(id uint64, out io.Writer)

// lockedWriter serializes the frames of concurrent replies: writeFrame writes a frame in one
// Write.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serveEngine is the engine process: it bounds its own memory, then serves requests from in
// until in ends (the parent closed it or died) or a close request, and returns the exit code.
func serveEngine(bound int64, in io.Reader, out io.Writer) int {
	if bound > 0 {
		if err := limitMemory(bound); err != nil {
			fmt.Fprintf(os.Stderr, "dataset engine: bound memory: %v\n", err)
			return 2
		}
	}
	var (
		wmu     sync.Mutex
		mu      sync.Mutex
		d       *duck
		cancels = map[uint64]context.CancelFunc{}
	)
	locked := &lockedWriter{mu: &wmu, w: out}
	reply := func(r engineResponse) {
		if err := writeFrame(locked, r); err != nil {
			// A result too large for a frame cannot happen within the caps; say so rather
			// than leave the parent waiting.
			_ = writeFrame(locked, engineResponse{ID: r.ID, Err: &engineError{Msg: "dataset engine: " + err.Error()}})
		}
	}
	br := bufio.NewReader(in)
	for {
		var req engineRequest
		if err := readFrame(br, &req); err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "dataset engine: read request: %v\n", err)
			}
			return 0
		}
		switch req.Op {
		case opLoad, opDescribe:
			if req.Load == nil {
				reply(engineResponse{ID: req.ID, Err: &engineError{Msg: "dataset engine: a load without its inputs"}})
				continue
			}
			l := *req.Load
			if req.Op == opDescribe {
				cols, err := describeFile(context.Background(), l.Path, l.Format, l.MemoryLimit)
				reply(engineResponse{ID: req.ID, Columns: cols, Err: toEngineError(err)})
				continue
			}
			mu.Lock()
			loaded := d != nil
			mu.Unlock()
			if loaded {
				reply(engineResponse{ID: req.ID, Err: &engineError{Msg: "dataset engine: a dataset is loaded already"}})
				continue
			}
			cfg := engineConfig{threads: l.Threads, memoryLimit: l.MemoryLimit, conns: l.Conns}
			nd, opts, err := openDuck(context.Background(), cfg, loadSpec{path: l.Path, format: l.Format, name: l.Name, opts: l.Options})
			if err != nil {
				reply(engineResponse{ID: req.ID, Options: &opts, Err: toEngineError(err)})
				continue
			}
			mu.Lock()
			d = nd
			mu.Unlock()
			reply(engineResponse{ID: req.ID, Options: &opts, Columns: nd.columns, Rows: nd.rows, Bytes: max(nd.bytes, residentBytes())})
		case opQuery:
			mu.Lock()
			cur := d
			ctx, cancel := context.WithCancel(context.Background())
			cancels[req.ID] = cancel
			mu.Unlock()
			go func(req engineRequest) {
				defer func() {
					mu.Lock()
					delete(cancels, req.ID)
					mu.Unlock()
					cancel()
				}()
				if cur == nil || req.Query == nil {
					reply(engineResponse{ID: req.ID, Err: &engineError{Msg: "dataset engine: a query before a load"}})
					return
				}
				q := req.Query
				if misbehave := engineTestQueries[q.Statement]; misbehave != nil {
					misbehave(req.ID, locked)
					return
				}
				res, err := cur.query(ctx, q.Statement, queryLimits{timeout: q.Timeout, rows: q.Rows, bytes: q.Bytes})
				if err != nil {
					reply(engineResponse{ID: req.ID, Err: toEngineError(err)})
					return
				}
				reply(engineResponse{ID: req.ID, Result: &engineResult{Text: []byte(res.Text), Columns: res.Columns, Rows: res.Rows, Truncated: res.Truncated, TruncatedBy: res.TruncatedBy}})
			}(req)
		case opCancel:
			mu.Lock()
			if cancel := cancels[req.Cancel]; cancel != nil {
				cancel()
			}
			mu.Unlock()
		case opHealthy:
			mu.Lock()
			cur := d
			mu.Unlock()
			go func(id uint64) {
				reply(engineResponse{ID: id, Healthy: cur != nil && cur.healthy(context.Background())})
			}(req.ID)
		case opClose:
			// The database is not closed: a database in an unknown state may abort the process
			// when it is closed (DuckDB throws from its destructors), and the process's exit
			// frees everything anyway.
			return 0
		default:
			reply(engineResponse{ID: req.ID, Err: &engineError{Msg: "dataset engine: unknown operation " + strconv.Quote(req.Op)}})
		}
	}
}
