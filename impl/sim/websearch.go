package sim

// Hosted web search: with [[sim web_search=N]] and a hosted web search tool on offer, a
// Responses or Messages reply opens with min(N, cap) searches run "by the provider", in the
// shapes of the real APIs (web_search_call items; server_tool_use and web_search_tool_result
// blocks with usage.server_tool_use.web_search_requests). The searches are content of the
// reply but not content events: they are sent before the first text delta (or tool argument
// fragment) and cost no output tokens.

// maxSearches bounds web_search= so that a directive cannot ask for an unbounded answer.
const maxSearches = 100

// searchSalt separates the seed of the search queries from that of the reply's words.
const searchSalt = 0xbb67ae8584caa73b

// searchWords is the number of vocabulary words in a search query.
const searchWords = 3

// searchResults is the number of results each search returns (Messages).
const searchResults = 2

// planSearches returns how many searches the turn makes: asked searches (the directive's
// web_search=, 0 when absent), when the request offers a hosted web search tool and does not
// forbid tool use, bounded by the request's cap when it has one.
func planSearches(asked int, in *planInput) int {
	if asked <= 0 || !in.webSearch || in.choiceNone {
		return 0
	}
	n := min(asked, maxSearches)
	if in.searchCapped {
		n = min(n, max(in.searchCap, 0))
	}
	return n
}

// searchSeed is the seed of search i of the turn.
func (t *turn) searchSeed(i int) uint64 {
	return mix(t.seed ^ searchSalt ^ uint64(i+1)*0x9e3779b97f4a7c15)
}

// appendQuery appends the query of search i (vocabulary words, which need no escaping).
func (t *turn) appendQuery(b []byte, i int) []byte {
	seed := t.searchSeed(i)
	for k := 0; k < searchWords; k++ {
		b = appendToken(b, seed, k)
	}
	return b
}

// query returns the query of search i.
func (t *turn) query(i int) string { return string(t.appendQuery(nil, i)) }

// appendSearchResult appends result r of search i: a web_search_result block whose URL, title
// and encrypted_content are drawn from the search's seed.
func (t *turn) appendSearchResult(b []byte, i, r int) []byte {
	seed := mix(t.searchSeed(i) + uint64(r+1)*0xd6e8feb86659fd93)
	b = append(b, `{"type":"web_search_result","url":"https://example.com/`...)
	for k := 0; k < 2; k++ {
		if k > 0 {
			b = append(b, '-')
		}
		b = append(b, word(seed, k)...)
	}
	b = append(b, `","title":"`...)
	for k := 0; k < 2; k++ {
		w := word(seed, k)
		if k > 0 {
			b = append(b, ' ')
		}
		b = append(b, w[0]-'a'+'A')
		b = append(b, w[1:]...)
	}
	b = append(b, ` - Example","encrypted_content":"`...)
	b = appendOpaque(b, seed, 48)
	return append(b, `","page_age":null}`...)
}

// appendOpaque appends n base64 characters drawn from seed, as an opaque token.
func appendOpaque(b []byte, seed uint64, n int) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var x uint64
	for k := 0; k < n; k++ {
		if k%10 == 0 {
			x = mix(seed + uint64(k/10+1)*0x9e3779b97f4a7c15)
		}
		b = append(b, alphabet[x&63])
		x >>= 6
	}
	return b
}
