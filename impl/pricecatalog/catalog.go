// Package pricecatalog knows the published prices of models, so that a configuration can name a
// model's price instead of typing its numbers. A Catalog holds entries by name, each with the
// dates from which its prices hold; Builtin is the catalog that ships with the gateway (the
// providers' list prices, each entry naming the page it was read from), and LoadLiteLLM reads
// the community-maintained price list most gateway operators already keep (LiteLLM's
// model_prices_and_context_window.json), mapping its per-token dollar amounts exactly onto
// integer micro-units per million tokens.
package pricecatalog

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/impl/price"
)

// Entry is one model's price from one date on.
type Entry struct {
	// Name is the catalog name a configuration uses ("claude-sonnet-4-5", "gpt-4.1-mini").
	Name string
	// Provider is who publishes the price ("anthropic", "openai").
	Provider string
	// Effective is the first day (YYYY-MM-DD) the price holds; "" for a price of unknown date
	// (a LiteLLM file's), which holds from the beginning.
	Effective string
	// Source names where the numbers were read: a provider's pricing page, or a file.
	Source string
	// Price is the price; its Catalog and Effective fields name this entry.
	Price price.Price
	// Err is why the entry's price was refused (a LiteLLM price that is not a whole number of
	// micro-units per million tokens, say), naming the model and the field; nil for a usable
	// entry. A refused entry is kept so that looking its name up says why it has no price
	// instead of finding nothing or an older entry; its Price is zero and must not be billed.
	Err error
}

// Catalog is a set of entries by name.
type Catalog struct {
	entries map[string][]Entry // by name, sorted by Effective
	// skipped are the entries of a price list that were not read for their kind of model (a
	// LiteLLM embedding model), by name, each with Err saying why: Lookup finds one only when
	// the catalog has no entry of its name.
	skipped map[string]Entry
}

// New returns a catalog of the entries. Entries of one name are kept by effective date; a
// later entry with the same name and date replaces an earlier one.
func New(entries ...Entry) *Catalog {
	c := &Catalog{entries: map[string][]Entry{}, skipped: map[string]Entry{}}
	for _, e := range entries {
		c.add(e)
	}
	return c
}

// skip records e, which has Err set, as an entry of a price list that was not read.
func (c *Catalog) skip(e Entry) {
	e.Price = price.Price{}
	c.skipped[e.Name] = e
}

func (c *Catalog) add(e Entry) {
	e.Price.Catalog, e.Price.Effective = e.Name, e.Effective
	list := c.entries[e.Name]
	i := sort.Search(len(list), func(i int) bool { return list[i].Effective >= e.Effective })
	if i < len(list) && list[i].Effective == e.Effective {
		list[i] = e
	} else {
		list = slices.Insert(list, i, e)
	}
	c.entries[e.Name] = list
}

// Overlay returns a catalog with the entries of c and of top; a name top has is top's alone,
// on every day: the operator's list (a LiteLLM file, whose entries state no date) replaces
// the built-in dated entries of the same name, rather than losing to them from their dates on
// (configuration trial: a file pricing gpt-4.1-mini at twice the built-in price was billed at
// the built-in one, and an entry the file got wrong, which is refused, was hidden by it).
// Skipped entries of both are kept, top's over c's, and hide no entry of either.
func (c *Catalog) Overlay(top *Catalog) *Catalog {
	out := New()
	for _, cat := range []*Catalog{c, top} {
		if cat != nil {
			for _, e := range cat.skipped {
				out.skip(e)
			}
		}
	}
	if c != nil {
		for name, list := range c.entries {
			if top != nil {
				if _, mine := top.entries[name]; mine {
					continue
				}
			}
			for _, e := range list {
				out.add(e)
			}
		}
	}
	if top != nil {
		for _, list := range top.entries {
			for _, e := range list {
				out.add(e)
			}
		}
	}
	return out
}

// Lookup returns the entry of name in force on day (YYYY-MM-DD): the one with the latest
// effective date not after day. Names are matched as given, then without a provider prefix
// ("anthropic/claude-sonnet-4-5" finds "claude-sonnet-4-5"). A name that has no entries but
// that a price list skipped (a LiteLLM embedding model) finds the skipped entry, whose Err
// says why it was skipped.
//
// The entry found may be a refused or skipped one: callers must check its Err and bill nothing
// at its Price when Err is not nil. Price does both steps and returns the error.
func (c *Catalog) Lookup(name, day string) (Entry, bool) {
	list := c.dated(name)
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Effective <= day {
			return list[i], true
		}
	}
	if list == nil && c != nil {
		e, ok := c.skipped[name]
		if _, rest, cut := strings.Cut(name, "/"); !ok && cut {
			e, ok = c.skipped[rest]
		}
		if ok {
			return e, true
		}
	}
	return Entry{}, false
}

// NextChange is the first effective date after day of an entry of name (as Lookup finds the
// name), or "" when no entry of it takes effect after day.
func (c *Catalog) NextChange(name, day string) string {
	for _, e := range c.dated(name) {
		if e.Effective > day {
			return e.Effective
		}
	}
	return ""
}

// dated is the entries of name by effective date, matched as given, then without a provider
// prefix ("anthropic/claude-sonnet-4-5" finds "claude-sonnet-4-5"); nil when there are none.
func (c *Catalog) dated(name string) []Entry {
	if c == nil {
		return nil
	}
	list, ok := c.entries[name]
	if !ok {
		if _, rest, cut := strings.Cut(name, "/"); cut {
			list = c.entries[rest]
		}
	}
	return list
}

// ErrNotFound is what Price wraps when the catalog has no entry of a name in force on a day.
var ErrNotFound = errors.New("no catalog entry")

// Price is the price of name in force on day, as Lookup finds it, or an error: one wrapping
// ErrNotFound when there is no such entry, or the entry's Err when its price was refused.
func (c *Catalog) Price(name, day string) (price.Price, error) {
	e, ok := c.Lookup(name, day)
	if !ok {
		return price.Price{}, fmt.Errorf("price catalog: model %q on %s: %w", name, day, ErrNotFound)
	}
	if e.Err != nil {
		return price.Price{}, e.Err
	}
	return e.Price, nil
}

// Names lists the catalog's names, sorted.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.entries))
	for n := range c.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Entries returns every entry of name, oldest first.
func (c *Catalog) Entries(name string) []Entry {
	if c == nil {
		return nil
	}
	return slices.Clone(c.entries[name])
}
