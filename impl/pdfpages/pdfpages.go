package pdfpages

import (
	"bytes"
	"compress/zlib"
	"io"
)

// The bounds of Count.
const (
	// headerWindow is how far into the file its %PDF- header may start (readers accept
	// leading bytes before it, within the first kilobyte).
	headerWindow = 1024
	// dictWindow is the longest a stream's dictionary may be, from the "obj" keyword before it
	// to its "stream" keyword; a longer one makes the count uncertain.
	dictWindow = 4096
	// skipWindow is the most whitespace and comment scan reads after a name; more between
	// /Type and the name after it is read as /Page (so that reading stays linear: each name in
	// a long comment would read the rest of it).
	skipWindow = 256
	// inflateRatio, inflateFloor and inflateCeiling bound the bytes all the compressed streams
	// of one file may inflate to: inflateRatio times the file's size, or inflateFloor if that
	// is more, and never more than inflateCeiling.
	inflateRatio   = 64
	inflateFloor   = 1 << 20
	inflateCeiling = 32 << 20
	// objectStreamCeiling is the most one object stream may inflate to: its objects are held in
	// memory to be read (a content stream's inflated bytes are only counted, never held), so
	// that concurrent requests each with a small compressed PDF cannot make the process hold
	// inflateCeiling bytes apiece; a larger one makes the count uncertain.
	objectStreamCeiling = 4 << 20
	// MaxCount is the largest count Count reports (a page tree's /Count can state any number).
	MaxCount = 1 << 20
	// scopeWindow is how far before and after a /Count its dictionary's delimiters are looked
	// for, and scopeBudget the most bytes those looks read in one file: past either, a /Count is
	// taken as a page tree's (the count errs upwards).
	scopeWindow = 4096
	scopeBudget = 1 << 20
)

// Document is what Read finds in a PDF.
type Document struct {
	// Pages is the number of pages (see Read).
	Pages int
	// Inflated is the bytes the file's compressed streams other than images and
	// cross-reference streams inflate to: its pages' content streams among them, whose text
	// a provider extracts and bills, and which the file's size does not show.
	Inflated int
}

// Budget is what the compressed streams of several files read with ReadWithin have inflated,
// which is at most what one file's may (inflateCeiling, 32 MiB) in all: the documents of one
// request share one, so that many small files, each within its own bound (at least 1 MiB for
// a file of a kilobyte), cannot make one request inflate gigabytes. Its zero value is ready to
// use.
type Budget struct {
	spent int
}

// Count is Read's number of pages.
func Count(data []byte) (int, bool) {
	d, ok := Read(data)
	return d.Pages, ok
}

// Read is what the PDF in data holds, and whether it could be established. Its pages are the
// number of page objects (/Type /Page, names compared after their #xx escapes, whitespace and
// comments between them allowed) in the file and in its FlateDecode object streams, the
// largest /Count stated in either by a dictionary that is not an outline's (directly, or by a
// reference to an object that holds the number, or refers to it: pageTree.counts), the pages
// a linearization dictionary at the file's start states (linearizedPages), the number of
// /Contents that refer to an object (a page's, typed or not), or the leaves of the page tree
// (pageTree.pages), whichever is largest, at most MaxCount. It is not established (false)
// for data without a PDF header, for an encrypted file (its streams cannot be read), for one
// whose page tree states a /Kids by a reference the walk does not read as an array of
// references (pageTree.kids: a /Kids outside the page tree, a form's or a name tree's, is not
// read), or whose page tree cannot be walked within its bounds, when a compressed stream other
// than an image or a cross-reference stream has a filter other than FlateDecode alone, or an
// object stream (its dictionary names /Type /ObjStm, /N or /First) decode parameters that
// cannot be undone (readPredictor: a PNG or TIFF predictor is undone, its parameters direct or
// in an object of their own, wherever that is: readDeferred), or a cross-reference stream
// entries readers read and this cannot (pageTree.indexXrefStream), when a stream's dictionary
// is longer than dictWindow, when inflating reaches the bound (inflateRatio times the file's
// size or inflateFloor, at most inflateCeiling bytes in all), or when no page is found. A
// stream's dictionary is the text from its object's header to its "stream" keyword; when that
// text is not one plain dictionary (plainDictionary: a string, a comment or a name may say
// "obj" there), every name since the previous stream is read as the dictionary's, so that no
// text can hide an object stream or its filter. The work is linear in the size of data and of
// what it inflates to.
func Read(data []byte) (Document, bool) {
	return ReadWithin(data, nil)
}

// ReadWithin is Read, with what the file's compressed streams inflate also taken from shared
// (nil: none), the file's own bound being at most what shared has left: once it is spent, a
// file with a compressed stream to inflate is not established.
func ReadWithin(data []byte, shared *Budget) (Document, bool) {
	header := bytes.Index(data[:min(len(data), headerWindow)], []byte("%PDF-"))
	if header < 0 {
		return Document{}, false
	}
	var c counter
	c.scan(data)
	c.stated = max(c.stated, linearizedPages(data, header))
	c.tree.indexFile(data)
	budget := min(max(inflateRatio*len(data), inflateFloor), inflateCeiling)
	if shared != nil {
		budget = min(budget, inflateCeiling-shared.spent)
		own := budget
		defer func() { shared.spent += own - budget }()
	}
	inflated := 0
	// passed are the streams nothing was inflated of: those without a filter, and those taken
	// for images or cross-reference streams by their dictionaries (readContents).
	var passed []passedStream
	// deferred are the streams whose decode parameters are given by a reference, read once
	// every other stream has been (readDeferred).
	var deferred []deferredStream
	// prev is where the dictionary of the next stream may start at the earliest: after the
	// previous "stream" keyword, so that each byte is read as part of one dictionary at most.
	prev := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("stream"))
		if j < 0 {
			break
		}
		at := i + j
		i = at + len("stream")
		if !streamKeyword(data, at) {
			continue
		}
		from := prev
		if k := bytes.LastIndex(data[prev:at], []byte("obj")); k >= 0 {
			from = prev + k + len("obj")
		}
		if at-from > dictWindow {
			return Document{}, false
		}
		num := -1 // not known
		if plainDictionary(data, from, at) {
			num, _ = objectHeader(data, from-len("obj"))
		} else {
			// The "obj" may be in the dictionary itself (in a string, a comment or a name),
			// hiding the entries before it: every name since the previous stream is read
			// instead, which can only make the count err upwards.
			from = prev
		}
		prev = i
		c.noteStream(num)
		n, objects, ok := streamData(data, from, at, &budget, false)
		if !ok {
			return Document{}, false
		}
		if n == 0 && objects == nil {
			passed = append(passed, passedStream{num: num, from: from, at: at})
		}
		inflated += n
		s := deferredStream{dict: data[from:at], start: streamStart(data, i), objects: objects, raw: n == 0}
		if s.predictedByReference() {
			// Its decode parameters may be defined in an object stream further on.
			if deferred = append(deferred, s); !c.tree.deferred(len(deferred), len(objects)) {
				return Document{}, false
			}
			continue
		}
		if !c.readStream(data, s, &budget) {
			return Document{}, false
		}
	}
	if !c.readDeferred(data, deferred, &budget) {
		return Document{}, false
	}
	contents, ok := c.readContents(data, passed, &budget)
	if !ok {
		return Document{}, false
	}
	inflated += contents
	if c.encrypted {
		return Document{}, false
	}
	leaves, walked := c.tree.pages()
	if !walked {
		return Document{}, false
	}
	counted, ok := c.tree.statedCounts()
	if !ok {
		return Document{}, false
	}
	c.stated = max(c.stated, counted)
	n := max(c.pages, c.stated, c.withContents, leaves)
	if n == 0 {
		return Document{}, false
	}
	return Document{Pages: min(n, MaxCount), Inflated: inflated}, true
}

// passedStream is a stream Read inflated nothing of: its object number (-1: not known), and
// its dictionary data[from:at].
type passedStream struct {
	num, from, at int
}

// readContents inflates, within budget, the compressed streams of passed that a page's
// /Contents names (or whose object number is not known), and returns what they inflate to: a
// reader draws a page's contents whatever their dictionary says, so that a content stream
// whose dictionary says /Subtype /Image or /Type /XRef shows its text all the same. An image
// or a cross-reference stream that no /Contents names is not inflated, unless a /Contents
// names an object that is no stream of the file (an array of references, which is not read).
func (c *counter) readContents(data []byte, passed []passedStream, budget *int) (int, bool) {
	for num := range c.contents {
		if _, ok := c.streams[num]; !ok {
			// Not a stream of the file: an array of the contents' references, perhaps, which
			// is not read, so that any stream may be among them.
			c.allContents = true
		}
	}
	inflated := 0
	for _, s := range passed {
		if _, named := c.contents[s.num]; !named && s.num >= 0 && !c.allContents {
			continue
		}
		n, _, ok := streamData(data, s.from, s.at, budget, true)
		if !ok {
			return 0, false
		}
		inflated += n
	}
	return inflated, true
}

// streamKeyword reports whether the "stream" at data[at] can be the keyword that starts a
// stream's data: not part of a longer word ("endstream", "upstream"), and followed by
// whitespace. The specification asks for an end of line, but readers take spaces before it
// too (qpdf warns of "extraneous whitespace" and reads the stream), or none at all (MuPDF).
func streamKeyword(data []byte, at int) bool {
	end := at + len("stream")
	return (at == 0 || !regular(data[at-1])) && end < len(data) && space(data[end])
}

// streamStart is where the data of the stream whose keyword ends at data[end] starts: after
// the spaces and tabs, then the end of line (CR, LF or both) that follow the keyword.
func streamStart(data []byte, end int) int {
	for end < len(data) && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	if end < len(data) && data[end] == '\r' {
		end++
	}
	if end < len(data) && data[end] == '\n' {
		end++
	}
	return end
}

// plainDictionary reports whether data[from:at], the text between the last "obj" before a
// stream's keyword at data[at] and that keyword, is the stream's whole dictionary as a reader
// sees it: the "obj" ends an object's header (an object number and a generation, alone on
// their line or after an endobj), and what follows it is one dictionary holding no string and
// no comment, its << and >> balanced. Otherwise the "obj" could be text in the dictionary
// itself ("/Note (9 0 obj)", a comment, a name), and the entries before it, /Filter or /Type
// /ObjStm among them, would go unread.
func plainDictionary(data []byte, from, at int) bool {
	_, ok := objectHeader(data, from-len("obj"))
	return ok && oneDictionary(data[from:at])
}

// objectHeader is the object number before the "obj" at data[i], and whether that "obj"
// follows an object number and a generation (integers, whitespace between), which follow the
// start of the data, an end of line or an "endobj".
func objectHeader(data []byte, i int) (int, bool) {
	if i < 0 || i >= len(data) {
		return 0, false
	}
	for range 2 {
		j := i
		for j > 0 && (data[j-1] == ' ' || data[j-1] == '\t') {
			j--
		}
		if j == i {
			return 0, false
		}
		i = j
		for j > 0 && data[j-1] >= '0' && data[j-1] <= '9' {
			j--
		}
		if j == i {
			return 0, false
		}
		i = j
	}
	num := readNumber(data, i)
	for k := i; k > 0 && space(data[k-1]); k-- {
		if data[k-1] == '\n' || data[k-1] == '\r' {
			return num, true
		}
		i = k - 1
	}
	return num, i == 0 || bytes.HasSuffix(data[:i], []byte("endobj"))
}

// oneDictionary reports whether b is whitespace, one dictionary and whitespace, with no
// string or comment in it (no parenthesis, no percent sign), its << and >> balanced.
func oneDictionary(b []byte) bool {
	i := 0
	for i < len(b) && space(b[i]) {
		i++
	}
	if !bytes.HasPrefix(b[i:], []byte("<<")) {
		return false
	}
	depth := 0
	for ; i < len(b); i++ {
		switch {
		case b[i] == '(' || b[i] == ')' || b[i] == '%':
			return false
		case b[i] == '<' && i+1 < len(b) && b[i+1] == '<':
			depth++
			i++
		case b[i] == '>' && i+1 < len(b) && b[i+1] == '>':
			depth--
			i++
			if depth == 0 {
				for i++; i < len(b) && space(b[i]); i++ {
				}
				return i == len(b)
			}
		}
	}
	return false
}

// counter holds what scan has found.
type counter struct {
	// pages is the number of page objects; stated the largest /Count of a dictionary that is
	// not an outline's (outlineCount).
	pages, stated int
	// encrypted is set when an /Encrypt name is found.
	encrypted bool
	// scoped is the bytes outlineCount has read.
	scoped int
	// contents are the object numbers that a /Contents value refers to (noteContents), at
	// most maxContents of them; allContents is set past that, every stream then counting as
	// one.
	contents    map[int]struct{}
	allContents bool
	// withContents is the number of /Contents values that refer to an object: a page's
	// (an annotation's is a string), whether or not the page says /Type /Page, which readers
	// do not require of a leaf of the page tree.
	withContents int
	// streams are the object numbers of the file's streams (noteStream).
	streams map[int]struct{}
	// tree is the page tree's roots and the objects' definitions, walked for its leaves.
	tree pageTree
}

// noteStream records the object number of a stream of the file (-1: not known).
func (c *counter) noteStream(num int) {
	if num < 0 {
		return
	}
	if c.streams == nil {
		c.streams = map[int]struct{}{}
	}
	c.streams[num] = struct{}{}
}

// maxContents is the most object numbers of /Contents values a counter keeps.
const maxContents = 1 << 16

// scan counts the page objects and /Count values in b: every name is read where it starts,
// whatever surrounds it, so that nothing a reader would take for a page object is missed.
func (c *counter) scan(b []byte) {
	for i := 0; i < len(b); i++ {
		if b[i] != '/' {
			continue
		}
		nm, end := readName(b, i)
		window := b[:min(len(b), end+skipWindow)]
		j := skipSpace(window, end)
		switch {
		case nm.is("Type"):
			if next, _ := readName(b, j); next.is("Page") || (j == len(window) && j < len(b)) {
				c.pages++
			}
		case nm.is("Count"), nm.is("Kids"):
			num, _, indirect := reference(b, j)
			switch {
			case indirect && nm.is("Kids"):
				c.tree.kidsArray(num)
			case indirect:
				if !c.outlineCount(b, i) {
					c.tree.countObject(num)
				}
			default:
				if n := readInt(b, j); nm.is("Count") && n > c.stated && !c.outlineCount(b, i) {
					c.stated = n
				}
			}
		case nm.is("Pages"):
			if num, _, ok := reference(b, j); ok {
				c.tree.root(num)
			} else if bytes.HasPrefix(b[j:], []byte("<<")) {
				c.tree.directRoot = true
			}
		case nm.is("Encrypt"):
			c.encrypted = true
		case nm.is("Contents"):
			c.noteContents(b, j)
		case nm.is("DecodeParms"):
			if j < len(b) && b[j] == '[' {
				j = skipSpace(b[:min(len(b), j+1+skipWindow)], j+1)
			}
			if num, _, ok := reference(b, j); ok {
				c.tree.paramsObject(num)
			}
		}
	}
}

// noteContents records the object numbers that the /Contents value at b[i] refers to: one
// reference (N G R) or an array of them (an annotation's /Contents, a string, refers to none),
// and counts the value in withContents when it refers to one.
func (c *counter) noteContents(b []byte, i int) {
	array := i < len(b) && b[i] == '['
	if array {
		i++
	}
	start := i
	for {
		num, next, ok := reference(b, i)
		if !ok {
			return
		}
		if i == start {
			c.withContents++
		}
		if c.contents == nil {
			c.contents = map[int]struct{}{}
		}
		if len(c.contents) < maxContents {
			c.contents[num] = struct{}{}
		} else {
			c.allContents = true
		}
		if !array {
			return
		}
		i = next
	}
}

// reference reads the indirect reference (an object number, a generation and R, whitespace
// and comments before each, at most skipWindow bytes of them) at or after b[i]: the object
// number and the index after the R.
func reference(b []byte, i int) (num, next int, ok bool) {
	var n [2]int
	for k := range n {
		i = skipSpace(b[:min(len(b), i+skipWindow)], i)
		start := i
		for i < len(b) && i-start < 10 && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == start {
			return 0, 0, false
		}
		n[k] = readNumber(b, start)
	}
	i = skipSpace(b[:min(len(b), i+skipWindow)], i)
	if i >= len(b) || b[i] != 'R' || (i+1 < len(b) && regular(b[i+1])) {
		return 0, 0, false
	}
	return n[0], i + 1, true
}

// outlineCount reports whether the /Count at b[i] is an outline's: its dictionary (from the
// nearest unclosed << before it to the >> that closes that, wholeDictionary) names /First,
// /Last, /Title or /Outlines, which an outline or outline item has, and not /Kids, which a
// page tree node has (a crafted one may name /Title too). An outline's
// /Count is the number of its open items, not of pages (a manual with a thousand bookmarks
// states 1,000), and read as pages it would reserve a document's pages several times over.
// A dictionary whose delimiters are not found within scopeWindow, or once the file's
// scopeBudget is spent, is taken as a page tree's.
func (c *counter) outlineCount(b []byte, i int) bool {
	from, to := max(i-scopeWindow, 0), min(i+scopeWindow, len(b))
	if c.scoped+to-from > scopeBudget {
		return false
	}
	c.scoped += to - from
	start, depth := -1, 0
	for k := i - 1; k > from; k-- {
		if b[k] == '>' && b[k-1] == '>' {
			depth++
			k--
		} else if b[k] == '<' && b[k-1] == '<' {
			if depth == 0 {
				start = k + 1
				break
			}
			depth--
			k--
		}
	}
	end := -1
	depth = 0
	for k := i; k+1 < to; k++ {
		if b[k] == '<' && b[k+1] == '<' {
			depth++
			k++
		} else if b[k] == '>' && b[k+1] == '>' {
			if depth == 0 {
				end = k
				break
			}
			depth--
			k++
		}
	}
	if start < 0 || end < 0 || !wholeDictionary(b, from, start, end) {
		return false
	}
	dict := b[start:end]
	outline := false
	for k := 0; k < len(dict); k++ {
		if dict[k] != '/' {
			continue
		}
		nm, _ := readName(dict, k)
		if nm.is("Kids") {
			// A page tree node's, whatever else it names: readers find the pages through it
			// (and take a leaf without /Type for a page), and an outline has none.
			return false
		}
		outline = outline || nm.is("First") || nm.is("Last") || nm.is("Title") || nm.is("Outlines")
	}
	return outline
}

// wholeDictionary reports whether b[start:end], from a << to a >> found by looking for the
// delimiters alone, is a dictionary as a reader reads it, not one whose delimiters are text in
// a string or a comment (which could leave a page tree node's /Kids outside it): no % before
// its << on that line (from from on), and within it parentheses balanced, never closing more
// than they opened (a backslash escaping the byte after it, as in a string), with no % outside
// them.
func wholeDictionary(b []byte, from, start, end int) bool {
	for k := start - 1; k >= from && b[k] != '\n' && b[k] != '\r'; k-- {
		if b[k] == '%' {
			return false
		}
	}
	depth := 0
	for k := start; k < end; k++ {
		switch b[k] {
		case '\\':
			k++
		case '(':
			depth++
		case ')':
			if depth--; depth < 0 {
				return false
			}
		case '%':
			if depth == 0 {
				return false
			}
		}
	}
	return depth == 0
}

// streamData is the size the stream whose dictionary is data[from:at] and whose keyword
// "stream" is at data[at] inflates to, when it is compressed with FlateDecode and is neither an
// image (/Subtype /Image) nor a cross-reference stream (/Type /XRef), with budget lowered by
// it; and, for an object stream (/Type /ObjStm, or /N or /First, which an object stream must
// have), its inflated data, whose objects the caller reads (at most objectStreamCeiling bytes).
// Other streams' inflated bytes are counted, not kept. The size is 0 for any other stream and
// for one without a filter (its bytes are in the file as they are). It is false (not ok) when
// such a stream cannot be read: another filter, data that does not inflate, or a bound
// exceeded. An object stream's predictor is the caller's to undo (pageTree.undoPredictor). content reads the stream as a page's contents,
// whatever its dictionary says it is (an image, a cross-reference stream).
func streamData(data []byte, from, at int, budget *int, content bool) (n int, objects []byte, ok bool) {
	dict := data[from:at]
	var filters []name
	skip, objStm := false, false
	for i := 0; i < len(dict); i++ {
		if dict[i] != '/' {
			continue
		}
		nm, end := readName(dict, i)
		switch {
		case nm.is("Type"), nm.is("Subtype"):
			next, _ := readName(dict, skipSpace(dict, end))
			objStm = objStm || next.is("ObjStm")
			skip = skip || next.is("Image") || next.is("XRef")
		case nm.is("N"), nm.is("First"):
			objStm = true
		case nm.is("Filter"):
			filters = append(filters, filterNames(dict, skipSpace(dict, end))...)
		}
	}
	if (skip && !objStm && !content) || len(filters) == 0 {
		return 0, nil, true
	}
	if len(filters) != 1 || !filters[0].is("FlateDecode") {
		return 0, nil, false
	}
	start := streamStart(data, at+len("stream"))
	r, err := zlib.NewReader(bytes.NewReader(data[start:]))
	if err != nil {
		return 0, nil, false
	}
	limit := *budget
	if objStm {
		limit = min(limit, objectStreamCeiling)
		objects, err = io.ReadAll(io.LimitReader(r, int64(limit)+1))
		n = len(objects)
	} else {
		var copied int64
		copied, err = io.Copy(io.Discard, io.LimitReader(r, int64(limit)+1))
		n = int(copied)
	}
	if n > limit {
		*budget -= limit // inflated, if not counted
		return 0, nil, false
	}
	if err != nil && n == 0 {
		return 0, nil, false
	}
	*budget -= n
	return n, objects, true
}

// filterNames are the filter names of the /Filter value at b[i]: one name, or an array of
// names (comments and whitespace between them skipped). Anything else is an empty name, so
// that the caller does not take the filters for FlateDecode alone.
func filterNames(b []byte, i int) []name {
	if i < len(b) && b[i] == '/' {
		nm, _ := readName(b, i)
		return []name{nm}
	}
	if i >= len(b) || b[i] != '[' {
		return []name{{}}
	}
	var names []name
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; i = skipSpace(b, i) {
		if b[i] != '/' {
			return append(names, name{})
		}
		nm, end := readName(b, i)
		names = append(names, nm)
		i = end
	}
	return names
}

// name is a PDF name as readName decoded it: only a short one is kept (the names Count looks
// for are short), a longer one has n above len(b) and equals none of them.
type name struct {
	b [16]byte
	n int
}

// is reports whether the name is s.
func (nm *name) is(s string) bool {
	return nm.n == len(s) && string(nm.b[:nm.n]) == s
}

// readName reads the name that starts with the solidus at b[i]: its characters, with each
// #xx escape decoded, and the index after it. Anything but a solidus at b[i] is an empty name.
func readName(b []byte, i int) (name, int) {
	var nm name
	if i >= len(b) || b[i] != '/' {
		return nm, i
	}
	for i++; i < len(b) && regular(b[i]); i++ {
		c := b[i]
		if c == '#' && i+2 < len(b) && hex(b[i+1]) >= 0 && hex(b[i+2]) >= 0 {
			c = byte(hex(b[i+1])<<4 | hex(b[i+2]))
			i += 2
		}
		if nm.n < len(nm.b) {
			nm.b[nm.n] = c
		}
		nm.n++
	}
	return nm, i
}

// readInt is the non-negative integer at b[i] (an optional sign is read; a negative number is
// 0), at most MaxCount.
func readInt(b []byte, i int) int {
	return readIntUpTo(b, i, MaxCount)
}

// maxNumber is the most readNumber reads.
const maxNumber = 1 << 40

// readNumber is the integer at b[i] as readInt reads it, but at most maxNumber: an object
// number, or an offset in the file or in an object stream, which may well be past MaxCount (an
// object stream's objects past its first MiB, an object numbered 2,000,000), and which read as
// MaxCount would name another object or place, the one of every such number. A number past
// what a definition keeps makes the walk not established (pageTree.define).
func readNumber(b []byte, i int) int {
	return readIntUpTo(b, i, maxNumber)
}

// readIntUpTo is the non-negative integer at b[i] (an optional sign is read; a negative number
// is 0), at most most.
func readIntUpTo(b []byte, i, most int) int {
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	n := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = min(n*10+int(b[i]-'0'), most)
	}
	if neg {
		return 0
	}
	return n
}

// skipSpace is the index of the first byte at or after b[i] that is neither PDF whitespace
// nor in a comment (from % to the end of its line).
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch {
		case space(b[i]):
			i++
		case b[i] == '%':
			for i < len(b) && b[i] != '\n' && b[i] != '\r' {
				i++
			}
		default:
			return i
		}
	}
	return i
}

// space reports whether c is PDF whitespace: NUL, tab, line feed, form feed, carriage return,
// space.
func space(c byte) bool {
	return c == 0 || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '
}

// regular reports whether c is a regular character: neither whitespace nor a delimiter.
func regular(c byte) bool {
	switch c {
	case '(', ')', '<', '>', '[', ']', '{', '}', '/', '%':
		return false
	}
	return !space(c)
}

// hex is the value of the hexadecimal digit c, or -1.
func hex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
