package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/client"
)

func TestNewValidatesArguments(t *testing.T) {
	for _, base := range []string{"", "localhost:8080", "ftp://h", "http://h/v1", "http://h/v1/", "http://h/prefix/v1", "http://h/?x=1"} {
		if _, err := client.New(base, testKey); err == nil {
			t.Errorf("New(%q) succeeded, want an error", base)
		}
	}
	if _, err := client.New("http://h", " "); err == nil {
		t.Error("New with an empty key succeeded")
	}
	if _, err := client.New("http://h/", testKey); err != nil {
		t.Errorf("New(http://h/): %v", err)
	}
	if _, err := client.New("http://h", testKey, client.WithMaxRetries(-1)); err == nil {
		t.Error("WithMaxRetries(-1) accepted")
	}
}

func TestBearerKeyAndPathsOnEveryRequest(t *testing.T) {
	var (
		mu    sync.Mutex
		paths []string
	)
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("%s: Authorization = %q", r.URL.Path, got)
		}
		if got := r.Header.Get("X-Extra"); got != "yes" {
			t.Errorf("%s: X-Extra = %q", r.URL.Path, got)
		}
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/models":
			writeJSON(w, http.StatusOK, modelList("service-flint"))
		case "/v1/credits":
			writeCredits(w)
		case "/v1/models/service-flint":
			writeJSON(w, http.StatusOK, modelList("service-flint")["data"].([]map[string]any)[0])
		default:
			http.NotFound(w, r)
		}
	}), client.WithRequestEditor(func(_ context.Context, r *http.Request) error {
		r.Header.Set("X-Extra", "yes")
		return nil
	}))

	ctx := context.Background()
	if _, err := c.Models(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Credits(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := c.API.RetrieveModelWithResponse(ctx, "service-flint")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.ErrorFromResponse(resp.HTTPResponse, resp.Body); err != nil || resp.JSON200 == nil || resp.JSON200.Id != "service-flint" {
		t.Errorf("RetrieveModel: err %v, model %+v", err, resp.JSON200)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(paths, ","); got != "/v1/models,/v1/credits,/v1/models/service-flint" {
		t.Errorf("paths = %s", got)
	}
}

func TestModelListIsCached(t *testing.T) {
	clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	var hits atomic.Int32
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			t.Errorf("unexpected request %s", r.URL.Path)
		}
		if hits.Add(1) == 1 {
			writeJSON(w, http.StatusOK, modelList("service-flint", "service-flint-base"))
			return
		}
		writeJSON(w, http.StatusOK, modelList("service-flint", "service-flint-base", "service-quill"))
	}), client.WithClock(clock.Now), client.WithModelCacheTTL(10*time.Second))
	ctx := context.Background()

	first, err := c.Models(ctx)
	if err != nil || len(first) != 2 {
		t.Fatalf("Models = %v, %v", first, err)
	}
	first[0].Id = "mutated" // the caller's copy; the cache must not see it
	clock.Advance(9 * time.Second)
	second, err := c.Models(ctx)
	if err != nil || len(second) != 2 || second[0].Id != "service-flint" {
		t.Fatalf("Models = %v, %v", second, err)
	}
	if _, err := c.Model(ctx, "service-flint-base"); err != nil {
		t.Errorf("Model: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("requests within TTL = %d, want 1", n)
	}

	clock.Advance(2 * time.Second)
	third, err := c.Models(ctx)
	if err != nil || len(third) != 3 {
		t.Fatalf("Models after TTL = %v, %v", third, err)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("requests after TTL = %d, want 2", n)
	}

	c.Invalidate()
	if _, err := c.Models(ctx); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("requests after Invalidate = %d, want 3", n)
	}
}

func TestModelListErrorsAreNotCached(t *testing.T) {
	var hits atomic.Int32
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			writeOpenAIError(w, http.StatusInternalServerError, "server_error", "", "boom")
			return
		}
		writeJSON(w, http.StatusOK, modelList("service-flint"))
	}))
	ctx := context.Background()
	var apiErr *client.APIError
	if _, err := c.Models(ctx); !errors.As(err, &apiErr) || apiErr.Status != 500 {
		t.Fatalf("err = %v, want a 500 *APIError", err)
	}
	if m, err := c.Models(ctx); err != nil || len(m) != 1 {
		t.Fatalf("Models = %v, %v", m, err)
	}
}

func TestConcurrentModelCallersShareOneRequest(t *testing.T) {
	var hits atomic.Int32
	started := make(chan struct{})
	release := make(chan struct{})
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			close(started)
		}
		<-release
		writeJSON(w, http.StatusOK, modelList("service-flint"))
	}))

	const callers = 32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			m, err := c.Models(context.Background())
			if err == nil && (len(m) != 1 || m[0].Id != "service-flint") {
				err = errors.New("wrong list")
			}
			errs <- err
		})
	}
	<-started
	time.Sleep(50 * time.Millisecond) // let the other callers join the fetch
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestFollowerOutlivesCancelledLeader(t *testing.T) {
	var hits atomic.Int32
	started := make(chan struct{})
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			close(started)
			<-r.Context().Done() // the leader gives up
			return
		}
		writeJSON(w, http.StatusOK, modelList("service-flint"))
	}))

	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Models(leaderCtx)
		leaderErr <- err
	}()
	<-started
	followerDone := make(chan error, 1)
	go func() {
		m, err := c.Models(context.Background())
		if err == nil && len(m) != 1 {
			err = errors.New("wrong list")
		}
		followerDone <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("leader err = %v, want context.Canceled", err)
	}
	select {
	case err := <-followerDone:
		if err != nil {
			t.Errorf("follower err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follower did not finish")
	}
}

func TestWaitingCallerHonoursItsContext(t *testing.T) {
	release := make(chan struct{})
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		writeJSON(w, http.StatusOK, modelList("service-flint"))
	}))
	defer close(release)
	go func() { _, _ = c.Models(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Models(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestModelAnswersFromCachedList(t *testing.T) {
	var hits atomic.Int32
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/v1/models" {
			t.Errorf("Model asked %s, want only the list", r.URL.Path)
		}
		writeJSON(w, http.StatusOK, modelList("service-flint", "service-flint-base"))
	}))
	ctx := context.Background()

	m, err := c.Model(ctx, "service-flint-base")
	if err != nil || m.Id != "service-flint-base" || m.OwnedBy != "tollgate" {
		t.Fatalf("Model = %+v, %v", m, err)
	}
	_, err = c.Model(ctx, "service-absent")
	var nf *client.ModelNotFoundError
	if !errors.As(err, &nf) || nf.ID != "service-absent" {
		t.Fatalf("err = %v, want *ModelNotFoundError", err)
	}
	if !errors.Is(err, client.ErrModelNotFound) {
		t.Error("errors.Is(err, ErrModelNotFound) = false")
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

func TestAPIErrorEnvelopes(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   client.APIError
	}{
		{
			name:   "openai",
			status: 404,
			header: map[string]string{"x-request-id": "req_1"},
			body:   `{"error":{"message":"The model 'x' does not exist","type":"not_found_error","param":"model","code":"model_not_found"}}`,
			want:   client.APIError{Status: 404, Type: "not_found_error", Code: "model_not_found", Param: "model", Message: "The model 'x' does not exist", RequestID: "req_1"},
		},
		{
			name:   "messages",
			status: 529,
			header: map[string]string{"request-id": "req_2"},
			body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_body"}`,
			want:   client.APIError{Status: 529, Type: "overloaded_error", Message: "Overloaded", RequestID: "req_2"},
		},
		{
			name:   "messages request id from body",
			status: 400,
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"bad"},"request_id":"req_body"}`,
			want:   client.APIError{Status: 400, Type: "invalid_request_error", Message: "bad", RequestID: "req_body"},
		},
		{
			name:   "plain text",
			status: 502,
			body:   "bad gateway\n",
			want:   client.APIError{Status: 502, Message: "bad gateway"},
		},
		{
			name:   "empty",
			status: 500,
			want:   client.APIError{Status: 500, Message: "Internal Server Error"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := client.New(srv.URL, testKey, client.WithMaxRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Credits(context.Background())
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if *apiErr != tc.want {
				t.Errorf("APIError = %+v, want %+v", *apiErr, tc.want)
			}
			if apiErr.Error() == "" {
				t.Error("empty Error()")
			}
		})
	}
}

func TestAPIErrorModelNotFoundIs(t *testing.T) {
	e := &client.APIError{Status: 404, Type: "not_found_error", Code: "model_not_found"}
	if !errors.Is(e, client.ErrModelNotFound) {
		t.Error("model_not_found APIError is not ErrModelNotFound")
	}
	if errors.Is(&client.APIError{Status: 500}, client.ErrModelNotFound) {
		t.Error("500 APIError is ErrModelNotFound")
	}
	if err := client.ErrorFromResponse(&http.Response{StatusCode: 204}, nil); err != nil {
		t.Errorf("ErrorFromResponse(204) = %v", err)
	}
}
