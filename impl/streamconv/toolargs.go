package streamconv

// argumentsShape follows the arguments of one tool call as their pieces stream in, far enough
// to tell when they are whole: a JSON object (or array) whose closing bracket has come, so
// that nothing more can follow it. A chat upstream does not say when a call's arguments are
// done, only when the whole answer is (finish_reason); OpenAI sends the calls one after the
// other, but an upstream that interleaves parallel calls (fragments of call 0, then of call 1,
// then more of call 0) may still be sending a call's arguments after the next call began. The
// encoders close a call's item or block when the next call begins only if its arguments are
// whole by this measure, and otherwise when they become whole or the answer ends.
//
// The scan is of the raw (unescaped) argument text and costs a byte comparison or two a byte;
// it allocates nothing.
type argumentsShape struct {
	// depth is how many objects and arrays are open outside strings.
	depth int32
	// began says that the first bracket came; closed that the value it began has ended.
	began, closed bool
	// other says that something other than an object or array began the value, or came after
	// it: such arguments are never taken as whole, and their call waits for the answer's end.
	other bool
	// inString and escaped follow a string and a backslash escape in it.
	inString, escaped bool
}

// feed scans the next piece of the arguments.
func (s *argumentsShape) feed(piece string) {
	if s.other {
		return
	}
	for i := 0; i < len(piece); i++ {
		c := piece[i]
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if s.closed || (!s.began && c != '{' && c != '[') {
			s.other = true
			return
		}
		switch c {
		case '"':
			s.inString = true
		case '{', '[':
			s.began = true
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				s.closed = true
			}
		}
	}
}

// whole reports whether the arguments so far are one complete object or array, to which no
// more can be added.
func (s *argumentsShape) whole() bool { return s.closed && !s.other }
