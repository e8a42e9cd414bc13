package jsonview

import (
	"slices"
)

// Edits are changes to the members of the object a View holds, applied in one copy by AppendTo:
// values replaced, members removed, members added. The bytes outside the edited values and the
// removed members are copied as they came. The zero Edits is ready for use, and makes no
// allocation for the few edits a request needs.
type Edits struct {
	// The edits: the first len(opsBuf) in opsBuf (nops of them), all in more beyond. Indexes,
	// not slices into the arrays, keep an Edits on its caller's stack.
	nops   int
	opsBuf [8]op
	more   []op
	nadds  int
	addBuf [4]added
	adds   []added
}

// op replaces the bytes [start, end) of the object with with; remove marks a removed member
// (start is its key, end its value's end).
type op struct {
	start, end int
	with       []byte
	remove     bool
}

// added is a member to add: its name, which needs no escaping, and its value.
type added struct {
	key   string
	value []byte
}

// Replace sets the value of member m to value, JSON text the caller made valid. A member may be
// replaced only once; replacing a removed member leaves it removed.
func (e *Edits) Replace(m Member, value []byte) {
	e.push(op{start: m.Start, end: m.End, with: value})
}

// Remove leaves member m out, with the comma that separated it from its neighbour.
func (e *Edits) Remove(m Member) {
	e.push(op{start: m.KeyStart, end: m.End, remove: true})
}

// Add adds a member named key (a name that needs no escaping) with value, JSON text the caller
// made valid. Added members come first in the object, in the order they were added.
func (e *Edits) Add(key string, value []byte) {
	a := added{key: key, value: value}
	if e.adds == nil && e.nadds < len(e.addBuf) {
		e.addBuf[e.nadds] = a
		e.nadds++
		return
	}
	if e.adds == nil {
		e.adds = append([]added(nil), e.addBuf[:e.nadds]...)
	}
	e.adds = append(e.adds, a)
}

// Set replaces the value of the last member named key, or adds the member when there is none.
func (e *Edits) Set(v *View, key string, value []byte) {
	if m, ok := v.Lookup(key); ok {
		e.Replace(m, value)
		return
	}
	e.Add(key, value)
}

// Empty reports whether there is nothing to change.
func (e *Edits) Empty() bool { return len(e.opList()) == 0 && len(e.addList()) == 0 }

func (e *Edits) push(o op) {
	if e.more == nil && e.nops < len(e.opsBuf) {
		e.opsBuf[e.nops] = o
		e.nops++
		return
	}
	if e.more == nil {
		e.more = append([]op(nil), e.opsBuf[:e.nops]...)
	}
	e.more = append(e.more, o)
}

func (e *Edits) opList() []op {
	if e.more != nil {
		return e.more
	}
	return e.opsBuf[:e.nops]
}

func (e *Edits) addList() []added {
	if e.adds != nil {
		return e.adds
	}
	return e.addBuf[:e.nadds]
}

// AppendTo appends to dst the object of v with the edits made.
func (e *Edits) AppendTo(dst []byte, v *View) []byte {
	body := v.body
	if e.Empty() {
		return append(dst, body...)
	}
	dst = slices.Grow(dst, len(body)+e.growth())
	var buf [8]op
	ops := e.ranges(v, buf[:0])
	prev := 0
	if adds := e.addList(); len(adds) > 0 {
		// Added members go right after the opening brace, each followed by a comma unless it is
		// the last and nothing of the object's own members remains.
		open := SkipSpace(body, 0)
		dst = append(dst, body[:open+1]...)
		for i, a := range adds {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = append(dst, a.key...)
			dst = append(dst, '"', ':')
			dst = append(dst, a.value...)
		}
		if e.keptMembers(v) > 0 {
			dst = append(dst, ',')
		}
		prev = open + 1
	}
	for _, o := range ops {
		dst = append(dst, body[prev:o.start]...)
		dst = append(dst, o.with...)
		prev = o.end
	}
	return append(dst, body[prev:]...)
}

// growth is a bound on how much the edits may lengthen the object.
func (e *Edits) growth() int {
	n := 0
	for _, o := range e.opList() {
		n += len(o.with)
	}
	for _, a := range e.addList() {
		n += len(a.key) + len(a.value) + 4
	}
	return n
}

// keptMembers counts the object's members that no edit removes.
func (e *Edits) keptMembers(v *View) int {
	n := 0
	for _, m := range v.Members() {
		if !e.removed(m) {
			n++
		}
	}
	return n
}

// removed reports whether an edit removes m.
func (e *Edits) removed(m Member) bool {
	for _, o := range e.opList() {
		if o.remove && o.start == m.KeyStart {
			return true
		}
	}
	return false
}

// ranges appends to out the byte ranges to replace, in order and without overlap: a
// removed member takes the comma after it (or, when it is the last member kept, the comma
// before it), a replacement inside a removed member is dropped.
func (e *Edits) ranges(v *View, out []op) []op {
	ms := v.Members()
	ops := e.opList()
	for i, m := range ms {
		if !e.removed(m) {
			continue
		}
		start, end := m.KeyStart, m.End
		switch {
		case e.nextKept(ms, i) >= 0:
			// Up to the next member (the members between, removed too, have their own ranges).
			end = ms[i+1].KeyStart
		case e.prevKept(ms, i) >= 0:
			// The last member kept comes before: from the end of its value.
			start = ms[e.prevKept(ms, i)].End
		case i+1 < len(ms):
			end = ms[i+1].KeyStart
		}
		out = append(out, op{start: start, end: end})
	}
	for _, o := range ops {
		if o.remove {
			continue
		}
		inside := false
		for _, r := range out {
			if r.with == nil && o.start >= r.start && o.end <= r.end {
				inside = true
			}
		}
		if !inside {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b op) int { return a.start - b.start })
	// Merge the ranges of neighbouring removals, which may overlap.
	merged := out[:0]
	for _, o := range out {
		if n := len(merged); n > 0 && o.start < merged[n-1].end {
			if o.end > merged[n-1].end {
				merged[n-1].end = o.end
			}
			continue
		}
		merged = append(merged, o)
	}
	return merged
}

// nextKept is the index of the first member after i that is kept, or -1.
func (e *Edits) nextKept(ms []Member, i int) int {
	for j := i + 1; j < len(ms); j++ {
		if !e.removed(ms[j]) {
			return j
		}
	}
	return -1
}

// prevKept is the index of the last member before i that is kept, or -1.
func (e *Edits) prevKept(ms []Member, i int) int {
	for j := i - 1; j >= 0; j-- {
		if !e.removed(ms[j]) {
			return j
		}
	}
	return -1
}
