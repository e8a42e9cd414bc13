package sim

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ScriptQuoteRunes is how many characters (Unicode code points) of the last tool result the
// answer of an exhausted script quotes.
const ScriptQuoteRunes = 400

// scriptOpen and scriptKey spell the start of a script directive: "[[sim", blanks, "script:".
const (
	scriptOpen = "[[sim"
	scriptKey  = "script:"
)

// ScriptStep is one call of a script: a tool name and its JSON arguments (an object; empty
// means {}).
type ScriptStep struct {
	Tool string
	Args string
}

// Script returns the directive that makes the simulator play steps, one call per model turn:
// [[sim script: call <tool> <args>; ...]].
func Script(steps ...ScriptStep) string {
	var b strings.Builder
	b.WriteString("[[sim script:")
	for i, s := range steps {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(" call ")
		b.WriteString(s.Tool)
		if s.Args != "" {
			b.WriteByte(' ')
			b.WriteString(s.Args)
		}
	}
	b.WriteString("]]")
	return b.String()
}

// ScriptAnswer returns the text an exhausted script answers when its last call was to tool and
// the last tool result was result: "Answer from <tool>: " and the first ScriptQuoteRunes
// characters of result.
func ScriptAnswer(tool, result string) string {
	return "Answer from " + tool + ": " + quote(result)
}

// quote returns the first ScriptQuoteRunes characters of s.
func quote(s string) string {
	n := 0
	for i := range s {
		if n == ScriptQuoteRunes {
			return s[:i]
		}
		n++
	}
	return s
}

// scriptCall is one parsed step of a script.
type scriptCall struct {
	tool string
	args string // the JSON object exactly as written
}

// script is the script a request plays: the calls of the last user message that carries a
// script directive, and what followed that message.
type script struct {
	directive string // the directive's text, for error messages
	calls     []scriptCall
	err       error // why the directive could not be parsed
	// results is the number of tool results after the message, the index of the next call.
	results int
	// last is the text of the last of those tool results.
	last string
}

// scriptScan follows a conversation in order and keeps the script of the last user message
// that carries one.
type scriptScan struct {
	text    string // that message's text
	found   bool
	results int
	last    string
}

// user notes the text of a user message.
func (sc *scriptScan) user(text string) {
	if findScript(text) >= 0 {
		sc.text, sc.found, sc.results, sc.last = text, true, 0, ""
	}
}

// result notes a tool result.
func (sc *scriptScan) result(text string) {
	if sc.found {
		sc.results++
		sc.last = text
	}
}

// script parses the kept message's directive; nil when no user message carried one.
func (sc *scriptScan) script() *script {
	if !sc.found {
		return nil
	}
	s := &script{results: sc.results, last: sc.last}
	i := findScript(sc.text)
	n, calls, err := parseScript(sc.text[i:])
	s.directive, s.calls, s.err = sc.text[i:i+n], calls, err
	if err == nil && findScript(sc.text[i+n:]) >= 0 {
		s.err = errors.New("a message holds at most one script")
	}
	return s
}

// errorMessage is the 400 answer to a script that cannot be parsed.
func (s *script) errorMessage() string {
	d := s.directive
	if utf8.RuneCountInString(d) > 200 {
		d = string([]rune(d)[:200]) + "…"
	}
	return "Invalid sim script directive " + strconv.Quote(d) + ": " + s.err.Error() + "."
}

// findScript returns the offset of the first script directive in text, or -1.
func findScript(text string) int {
	off := 0
	for {
		i := strings.Index(text[off:], scriptOpen)
		if i < 0 {
			return -1
		}
		at := off + i
		if scriptHead(text[at:]) > 0 {
			return at
		}
		off = at + len(scriptOpen)
	}
}

// scriptHead returns the length of "[[sim", blanks and "script:" at the start of s, or 0.
func scriptHead(s string) int {
	if !strings.HasPrefix(s, scriptOpen) {
		return 0
	}
	rest := strings.TrimLeft(s[len(scriptOpen):], " \t\r\n")
	if len(rest) == len(s)-len(scriptOpen) || !strings.HasPrefix(rest, scriptKey) {
		return 0
	}
	return len(s) - len(rest) + len(scriptKey)
}

// parseScript parses the script directive at the start of s. It returns the directive's
// length (up to and including its "]]"; up to the first "]]", or all of s, when it cannot be
// parsed) and its calls.
//
// The grammar, blanks allowed between the parts:
//
//	"[[sim" blank+ "script:" call (";" call)* ";"? "]]"
//	call = "call" blank+ name [ JSON object ]
//	name = one or more of A-Z a-z 0-9 _ - .
func parseScript(s string) (n int, calls []scriptCall, err error) {
	fail := func(msg string) (int, []scriptCall, error) {
		end := strings.Index(s, "]]")
		if end < 0 {
			return len(s), nil, errors.New(msg)
		}
		return end + 2, nil, errors.New(msg)
	}
	i := scriptHead(s)
	blank := func() {
		for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
			i++
		}
	}
	for {
		blank()
		if strings.HasPrefix(s[i:], "]]") {
			if len(calls) == 0 {
				return fail("it scripts no call")
			}
			return i + 2, calls, nil
		}
		step := strconv.Itoa(len(calls) + 1)
		if !strings.HasPrefix(s[i:], "call") || i+4 >= len(s) || strings.IndexByte(" \t\r\n", s[i+4]) < 0 {
			if i >= len(s) {
				return fail("it has no closing ]]")
			}
			return fail("step " + step + ` does not start with "call <tool>"`)
		}
		i += 4
		blank()
		start := i
		for i < len(s) && isNameByte(s[i]) {
			i++
		}
		if i == start {
			return fail("step " + step + " names no tool")
		}
		c := scriptCall{tool: s[start:i], args: "{}"}
		blank()
		if i < len(s) && s[i] != '{' && s[i] != ';' && !strings.HasPrefix(s[i:], "]]") {
			return fail("step " + step + " (" + c.tool + `) is followed by neither a JSON object, ";" nor "]]"`)
		}
		if i < len(s) && s[i] == '{' {
			dec := json.NewDecoder(strings.NewReader(s[i:]))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				// The decoder's own text is not quoted: the byte offset says where, and a
				// decoder that ran out of input says the object never closed.
				why := "it ends before the object closes"
				var se *json.SyntaxError
				if errors.As(err, &se) {
					why = "invalid JSON at byte " + strconv.FormatInt(se.Offset, 10) + " of them"
				}
				return fail("the arguments of step " + step + " (" + c.tool + ") are not a JSON object: " + why)
			}
			c.args = string(raw)
			i += int(dec.InputOffset())
		}
		calls = append(calls, c)
		blank()
		switch {
		case i < len(s) && s[i] == ';':
			i++
		case strings.HasPrefix(s[i:], "]]"):
		case i >= len(s):
			return fail("it has no closing ]]")
		default:
			return fail(`step ` + step + ` (` + c.tool + `) is followed by neither ";" nor "]]"`)
		}
	}
}

// isNameByte reports whether c may appear in a scripted tool name.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// playScript plans the turn of a scripted request: the next call, or the answer once the script
// is exhausted, or a text saying that the next call's tool is not on offer.
func (t *turn) playScript(sc *script, in *planInput) {
	t.stopSeq = ""
	if k := sc.results; k < len(sc.calls) {
		c := sc.calls[k]
		var d *toolDef
		if !in.choiceNone {
			d = findTool(in.tools, c.tool, "")
		}
		if d != nil {
			t.tool, t.namespace, t.finish = d.name, d.namespace, finishTool
			t.frags = argTokens(c.args)
			return
		}
		why := "which this request does not offer"
		if in.choiceNone && len(in.tools) > 0 {
			why = `which tool_choice "none" forbids`
		}
		t.scriptText("Script step "+strconv.Itoa(k+1)+" calls "+c.tool+", "+why+".", in.maxTokens)
		return
	}
	t.scriptText(ScriptAnswer(sc.calls[len(sc.calls)-1].tool, sc.last), in.maxTokens)
}

// scriptText makes s the reply text, cut at maxTokens (0 = no bound).
func (t *turn) scriptText(s string, maxTokens int) {
	t.frags = textTokens(s)
	t.words, t.finish = len(t.frags), finishStop
	if maxTokens > 0 && maxTokens < t.words {
		t.words, t.finish = maxTokens, finishLength
	}
}

// textTokens splits s into output tokens: a word with the blanks before it (and the last word
// with the blanks after it too), so that the tokens join to s again and count as its words.
func textTokens(s string) []string {
	var out []string
	start := 0
	prevSpace := false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if space && !prevSpace && i > start {
			out = append(out, s[start:i])
			start = i
		}
		prevSpace = space
	}
	switch {
	case start == len(s):
	case prevSpace && len(out) > 0:
		out[len(out)-1] += s[start:] // trailing blanks travel with the last word
	default:
		out = append(out, s[start:])
	}
	return out
}

// argTokens splits scripted JSON arguments into output tokens as generated arguments are: a
// token starts at every object key or scalar value after the first, so punctuation and blanks
// travel with the scalar before them.
func argTokens(args string) []string {
	var out []string
	start, scalars := 0, 0
	inString, escaped := false, false
	for i := 0; i < len(args); i++ {
		c := args[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		scalar := c == '"' || c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n'
		if !scalar {
			continue
		}
		if scalars > 0 {
			out = append(out, args[start:i])
			start = i
		}
		scalars++
		if c == '"' {
			inString = true
			continue
		}
		for i+1 < len(args) && strings.IndexByte(",]}: \t\r\n", args[i+1]) < 0 {
			i++ // the rest of a number or literal
		}
	}
	return append(out, args[start:])
}
