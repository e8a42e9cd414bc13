package client

import (
	"context"
	"errors"
	"slices"

	"github.com/tollgate/tollgate/gen/api"
)

// modelFetch is one in-flight request for the model list, shared by every
// caller that asks while it runs.
type modelFetch struct {
	done   chan struct{}
	models []api.Model
	err    error
}

// Models returns the models available to the account. The list is served
// from a cache for the client's TTL (see [WithModelCacheTTL]); concurrent
// callers that find the cache stale share a single request. The returned slice
// is the caller's own.
func (c *Client) Models(ctx context.Context) ([]api.Model, error) {
	for {
		c.mu.Lock()
		if c.valid && c.now().Sub(c.fetched) < c.ttl {
			out := slices.Clone(c.models)
			c.mu.Unlock()
			return out, nil
		}
		f := c.flight
		leader := f == nil
		gen := c.gen
		if leader {
			f = &modelFetch{done: make(chan struct{})}
			c.flight = f
		}
		c.mu.Unlock()

		if leader {
			c.fetchModels(ctx, f, gen)
		} else {
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		// A follower whose own context is still live does not inherit the
		// leader's cancellation: it tries again, leading a fetch if needed.
		if !leader && isContextErr(f.err) && ctx.Err() == nil {
			continue
		}
		if f.err != nil {
			return nil, f.err
		}
		return slices.Clone(f.models), nil
	}
}

// fetchModels runs fetch f and publishes its result; the list is cached only
// when no Invalidate happened since the fetch started (generation gen).
func (c *Client) fetchModels(ctx context.Context, f *modelFetch, gen uint64) {
	var list api.ModelList
	resp, err := c.API.ListModels(ctx)
	if err == nil {
		err = decode(resp, &list)
	}
	if err == nil && list.Data == nil {
		list.Data = []api.Model{}
	}

	c.mu.Lock()
	f.models, f.err = list.Data, err
	if c.flight == f {
		c.flight = nil
	}
	if err == nil && c.gen == gen {
		c.models = list.Data
		c.fetched = c.now()
		c.valid = true
	}
	c.mu.Unlock()
	close(f.done)
}

// Model returns the model with the given id from the cached model list (see
// [Client.Models]) rather than asking the gateway for it; a model that is not
// in the list yields a [*ModelNotFoundError].
func (c *Client) Model(ctx context.Context, id string) (api.Model, error) {
	models, err := c.Models(ctx)
	if err != nil {
		return api.Model{}, err
	}
	for _, m := range models {
		if m.Id == id {
			return m, nil
		}
	}
	return api.Model{}, &ModelNotFoundError{ID: id}
}

// Invalidate drops the cached model list, so the next [Client.Models] or
// [Client.Model] call fetches it again; a fetch already in flight is not
// cached when it completes.
func (c *Client) Invalidate() {
	c.mu.Lock()
	c.valid = false
	c.models = nil
	c.gen++
	c.flight = nil
	c.mu.Unlock()
}

// isContextErr reports whether err comes from a cancelled or expired context.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
