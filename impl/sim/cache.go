package sim

import (
	"hash/maphash"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Prompt caching (see "Prompt caching" in doc.go). The simulator keeps the hashes of the
// prompt prefixes it has cached, with their expiry, in one bounded store per Simulator; a
// request hashes its prompt once, while its tokens are counted, and snapshots that running
// hash where a prefix may be cached: at every cacheStep tokens on the OpenAI routes, at every
// content block boundary on Messages.

const (
	// cacheEntries bounds the number of cached prefixes; the least recently used goes first.
	cacheEntries = 8192
	// cacheStep is OpenAI's caching increment, in tokens: a cached prefix is a multiple of it.
	cacheStep = 128
	// stepChars is cacheStep in characters, at the simulator's four characters a token.
	stepChars = 4 * cacheStep
	// openAICacheMin is the shortest prompt, in tokens, that OpenAI caches.
	openAICacheMin = 1024
	// anthropicCacheMin and anthropicHaikuCacheMin are the shortest prefixes, in tokens, that
	// Anthropic caches: for Sonnet and Opus, and for Haiku.
	anthropicCacheMin      = 1024
	anthropicHaikuCacheMin = 2048
	// anthropicLookback is how many blocks before a breakpoint Anthropic looks for a cached
	// prefix.
	anthropicLookback = 20
	// The lifetimes of cached prefixes since their last use: OpenAI's in-memory retention and
	// its extended (prompt_cache_retention "24h") one, Anthropic's default and "1h" ttl.
	openAIRetention         = 5 * time.Minute
	openAIExtendedRetention = 24 * time.Hour
	anthropicTTL            = 5 * time.Minute
	anthropicLongTTL        = time.Hour
)

// promptCache is the set of cached prompt prefixes, keyed by their hash: a map into a slice of
// nodes that form a doubly linked list, most recently used first. It is safe for concurrent
// use; a request takes its lock once.
type promptCache struct {
	mu    sync.Mutex
	index map[uint64]int32
	nodes []cacheNode
	// head and tail are the most and least recently used nodes, free the first unused one of
	// nodes; -1 when there is none.
	head, tail, free int32
}

// cacheNode is one cached prefix.
type cacheNode struct {
	key     uint64
	expires int64 // Unix nanoseconds
	life    int64 // the lifetime since last use, in nanoseconds
	prev    int32
	next    int32
}

func newPromptCache() *promptCache {
	return &promptCache{index: make(map[uint64]int32), head: -1, tail: -1, free: -1}
}

// reset forgets every cached prefix.
func (c *promptCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.index)
	c.nodes = c.nodes[:0]
	c.head, c.tail, c.free = -1, -1, -1
}

// has reports whether key is cached and alive at now; it forgets it when it has expired. The
// caller holds c.mu.
func (c *promptCache) has(key uint64, now int64) bool {
	i, ok := c.index[key]
	if !ok {
		return false
	}
	if c.nodes[i].expires <= now {
		c.remove(i)
		return false
	}
	return true
}

// put caches key, or refreshes it, as most recently used: it lives life after now, or its
// own lifetime when that is longer (a refresh with life 0 keeps it). The caller holds c.mu.
func (c *promptCache) put(key uint64, now int64, life time.Duration) {
	l := int64(life)
	if i, ok := c.index[key]; ok {
		n := &c.nodes[i]
		n.life = max(n.life, l)
		n.expires = max(n.expires, now+n.life)
		c.unlink(i)
		c.pushFront(i)
		return
	}
	if len(c.index) >= cacheEntries {
		c.remove(c.tail)
	}
	var i int32
	if c.free >= 0 {
		i, c.free = c.free, c.nodes[c.free].next
	} else {
		c.nodes = append(c.nodes, cacheNode{})
		i = int32(len(c.nodes) - 1)
	}
	c.nodes[i] = cacheNode{key: key, expires: now + l, life: l}
	c.index[key] = i
	c.pushFront(i)
}

// remove forgets node i.
func (c *promptCache) remove(i int32) {
	delete(c.index, c.nodes[i].key)
	c.unlink(i)
	c.nodes[i].next, c.free = c.free, i
}

func (c *promptCache) unlink(i int32) {
	n := &c.nodes[i]
	if n.prev >= 0 {
		c.nodes[n.prev].next = n.next
	} else {
		c.head = n.next
	}
	if n.next >= 0 {
		c.nodes[n.next].prev = n.prev
	} else {
		c.tail = n.prev
	}
}

func (c *promptCache) pushFront(i int32) {
	n := &c.nodes[i]
	n.prev, n.next = -1, c.head
	if c.head >= 0 {
		c.nodes[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

// boundary is the end of a Messages content block (a tool, a system block, a message's
// block): the characters counted up to it, the hash of the prompt up to it, and the lifetime
// its cache_control asks for (0 when it carries none).
type boundary struct {
	chars int
	hash  uint64
	ttl   time.Duration
}

// tokens is the number of tokens of the prefix that ends at b.
func (b *boundary) tokens() int { return (b.chars + 3) / 4 }

// cacheControl is Anthropic's cache_control of a block, or of the request (automatic
// caching).
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// life is the lifetime the breakpoint asks for; 0 when cc is not an ephemeral breakpoint.
func (cc *cacheControl) life() time.Duration {
	switch {
	case cc == nil || cc.Type != "ephemeral":
		return 0
	case cc.TTL == "1h":
		return anthropicLongTTL
	default:
		return anthropicTTL
	}
}

// openAIRetentionOf is the lifetime of the prefixes of a request with prompt_cache_retention
// v.
func openAIRetentionOf(v string) time.Duration {
	if v == "24h" {
		return openAIExtendedRetention
	}
	return openAIRetention
}

// account is what partitions the cache by simulated account: the request's credential.
func account(r *http.Request, rt Route) string {
	if rt.anthropic() {
		if k := r.Header.Get("X-Api-Key"); k != "" {
			return k
		}
	}
	return r.Header.Get("Authorization")
}

// startHash makes the counter hash the prompt as it counts it, starting with the partition
// of the cache (the route, the model, the account, the prompt_cache_key). step, when
// positive, snapshots the hash every step characters (OpenAI's checkpoints); size is the
// request body's, which bounds their number.
func (c *counter) startHash(seed maphash.Seed, step, size int, partition ...string) {
	c.hashing = true
	c.h.SetSeed(seed)
	c.step, c.next = step, step
	if step > 0 {
		c.points = make([]uint64, 0, size/step)
	}
	for _, p := range partition {
		c.mark(p)
	}
}

// mark hashes s as structure: text that is part of the prompt but counts no tokens (a role,
// a tool's name, a block's type). Markers are framed by zero bytes.
func (c *counter) mark(s string) {
	if !c.hashing {
		return
	}
	_ = c.h.WriteByte(0)
	_, _ = c.h.WriteString(s)
	_ = c.h.WriteByte(0)
}

// markRaw hashes b as structure (a tool's schema, a response format).
func (c *counter) markRaw(b []byte) {
	if !c.hashing {
		return
	}
	_ = c.h.WriteByte(0)
	_, _ = c.h.Write(b)
	_ = c.h.WriteByte(0)
}

// hashText hashes s, which has n characters, and snapshots the hash at each checkpoint it
// reaches. It leaves c.chars unchanged.
func (c *counter) hashText(s string, n int) {
	chars := c.chars
	for c.step > 0 && chars+n >= c.next {
		k := c.next - chars // the characters of s before the checkpoint
		off := k
		if n != len(s) { // not ASCII: find the byte offset of character k
			off = len(s)
			i := 0
			for o := range s {
				if i == k {
					off = o
					break
				}
				i++
			}
		}
		_, _ = c.h.WriteString(s[:off])
		c.points = append(c.points, c.h.Sum64())
		s, n, chars = s[off:], n-k, chars+k
		c.next += c.step
	}
	_, _ = c.h.WriteString(s)
}

// boundary records the end of a Messages block whose cache_control asks for ttl.
func (c *counter) boundary(ttl time.Duration) {
	if c.hashing {
		c.blocks = append(c.blocks, boundary{chars: c.chars, hash: c.h.Sum64(), ttl: ttl})
	}
}

// cacheMinimum is the shortest prefix, in tokens, that the turn's route caches for its model,
// unless a cache_min directive set another.
func (t *turn) cacheMinimum() int {
	switch {
	case t.cacheMin > 0:
		return t.cacheMin
	case !t.route.anthropic():
		return openAICacheMin
	case strings.Contains(strings.ToLower(t.model), "haiku"):
		return anthropicHaikuCacheMin
	default:
		return anthropicCacheMin
	}
}

// now is the simulator's clock, in Unix nanoseconds.
func (s *Simulator) now() int64 {
	if s.opts.Now != nil {
		return s.opts.Now().UnixNano()
	}
	return time.Now().UnixNano()
}

// cacheOpenAI applies OpenAI's automatic prompt caching to a turn whose prompt reached the
// checkpoints points (the hash of its first (i+1)·cacheStep tokens at index i): the cached
// tokens are the longest run of checkpoints from the minimum on that is cached, and every
// checkpoint from the minimum on is cached (or refreshed) for life.
func (s *Simulator) cacheOpenAI(t *turn, points []uint64, life time.Duration) {
	lo := (t.cacheMinimum()+cacheStep-1)/cacheStep - 1 // the first checkpoint at the minimum
	lo = max(lo, 0)
	if lo >= len(points) {
		return
	}
	pts := points[lo:]
	if len(pts) > cacheEntries/2 { // so that one huge prompt cannot flush the whole cache
		pts = pts[:cacheEntries/2]
	}
	now := s.now()
	c := s.cache
	c.mu.Lock()
	n := 0
	for n < len(pts) && c.has(pts[n], now) {
		n++
	}
	// Longest first, so that the shorter prefixes are the more recently used and a run of
	// cached checkpoints loses its end first.
	for i := len(pts) - 1; i >= 0; i-- {
		c.put(pts[i], now, life)
	}
	c.mu.Unlock()
	if n > 0 {
		t.cacheRead = (lo + n) * cacheStep
	}
}

// cacheAnthropic applies Anthropic's prompt caching to a turn whose prompt has the block
// boundaries blocks, the breakpoints among them. For each breakpoint whose prefix reaches the
// minimum, the longest cached prefix ending at it or at one of the anthropicLookback blocks
// before it is looked up; the longest of them is read. The tokens from there to the last
// such breakpoint are written: those up to the last breakpoint with the one-hour ttl for an
// hour, the rest for five minutes. Every such breakpoint's prefix is cached (or refreshed)
// for its ttl, and the prefix read is refreshed.
func (s *Simulator) cacheAnthropic(t *turn, blocks []boundary) {
	if !slices.ContainsFunc(blocks, func(b boundary) bool { return b.ttl > 0 }) {
		return
	}
	lowest := t.cacheMinimum()
	now := s.now()
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := -1
	for i := len(blocks) - 1; i > hit; i-- {
		if blocks[i].ttl == 0 {
			continue
		}
		for j := i; j > hit && j >= i-anthropicLookback; j-- {
			if blocks[j].tokens() < lowest {
				break
			}
			if c.has(blocks[j].hash, now) {
				hit = j
				break
			}
		}
	}
	read := 0
	if hit >= 0 {
		read = blocks[hit].tokens()
		c.put(blocks[hit].hash, now, 0)
	}
	long, end := read, read // the token counts at the last one-hour breakpoint and at the last one
	for i := range blocks {
		b := &blocks[i]
		if b.ttl == 0 || b.tokens() < lowest {
			continue
		}
		c.put(b.hash, now, b.ttl)
		if i > hit {
			end = b.tokens()
			if b.ttl >= anthropicLongTTL {
				long = end
			}
		}
	}
	t.cacheRead, t.cacheWrite1h, t.cacheWrite5m = read, long-read, end-long
}
