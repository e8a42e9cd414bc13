package pdfpages

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"io"
	"math"
	"slices"
)

// The bounds of the page tree's walk.
const (
	// maxDefinitions is the most object definitions a file's index holds (an honest file of
	// MaxCount pages has fewer); past it, the count is not established.
	maxDefinitions = 1 << 18
	// maxRoots is the most page tree roots (objects a /Pages entry refers to) walked.
	maxRoots = 64
	// maxDepth is the deepest a page tree may be walked; a deeper one is not established.
	maxDepth = 256
	// walkBudget is the most bytes of dictionaries the walk parses, and the most kids it
	// visits, in one file; past either, the count is not established.
	walkBudget = 32 << 20
	// maxXrefEntries is the most entries of cross-reference streams read in one file (an
	// honest file of MaxCount pages has fewer); past it, the count is not established.
	maxXrefEntries = 1 << 20
	// retainCeiling is the most bytes of inflated object streams that may hold page tree
	// nodes a file's walk keeps (each is dropped once read otherwise); past it, the count is
	// not established.
	retainCeiling = 8 << 20
	// maxNesting is the deepest arrays and dictionaries in a node's dictionary are read.
	maxNesting = 64
	// maxIndirect is the most objects that /Kids values refer to (kidsArray), and the most
	// that /Count values do (countObject); past either, the count is not established.
	maxIndirect = 1 << 16
	// arraySearch is the most bytes of object streams not held that keepArray looks through
	// for the ends of the arrays they define, in one file; past it, the count is not
	// established.
	arraySearch = 32 << 20
)

// pageTree is what a walk of a file's page tree reads: where each object is defined, in the
// file or in an object stream, and the roots (the objects a catalog's /Pages refers to).
type pageTree struct {
	// sources are the file and its object streams' inflated data, and defs each object's
	// definitions in them (sorted by number before the walk). Text that only looks like an
	// object's header (in a string, a comment, an earlier version of the object) adds a
	// definition, which can only make the walk find more pages (leaves takes the most).
	sources [][]byte
	defs    []definition
	roots   []int
	// entries are the cross-reference streams' entries read (at most maxXrefEntries), and
	// held the bytes of inflated object streams among the sources (at most retainCeiling).
	entries, held int
	// full is set when defs, roots, kids or entries reached their bound, or an object
	// stream's objects cannot be placed with certainty (indexObjectStream).
	full bool
	// kids are the objects a /Kids value refers to (an array in an object of its own, which
	// readers read as the node's kids). A reader finds pages only in the page tree its
	// catalog's /Pages refers to, which the walk reads from every root: one it does not reach
	// is an interactive form's fields, a structure tree's or a name tree's, or text in a
	// string, and holds none. Only when the file states no root by a reference (directRoot,
	// or none at all: a reader repairing the file may take any node for one) must the walk
	// read each of them (walk.arrays), or the count is not established.
	kids map[int]struct{}
	// directRoot is set when a /Pages value is no reference (a dictionary written in the
	// catalog itself, which the walk does not read).
	directRoot bool
	// counts are the objects a page tree node's /Count value refers to (an integer in an
	// object of its own, which readers read as the count), params those a /DecodeParms value
	// does (a stream's decode parameters, resolveParams).
	counts, params map[int]struct{}
	// arrays holds copies of the arrays that object streams not held define (keepArray), the
	// source arraysSrc once the walk starts (0: none yet; the file is source 0); searched is
	// the bytes keepArray has looked through for their ends.
	arrays    []byte
	arraysSrc int32
	searched  int
	// resolved is the indirect decode parameters resolveParams has looked for, and waiting the
	// bytes of inflated object streams held until their parameters are resolved (deferred).
	resolved, waiting int
}

// definition is where object num is defined: from sources[src][at] on, or in an object
// stream not held, as a leaf (src is leaf).
type definition struct {
	num, src, at int32
}

// leaf is the src of a definition that is no page tree node (pageTree.hold).
const leaf = -2

// source adds b to the sources, and is its index.
func (t *pageTree) source(b []byte) int32 {
	t.sources = append(t.sources, b)
	return int32(len(t.sources) - 1)
}

// define records a definition of object num, from sources[src][at] on.
func (t *pageTree) define(num int, src int32, at int) {
	if len(t.defs) >= maxDefinitions || num > math.MaxInt32 {
		t.full = true
		return
	}
	t.defs = append(t.defs, definition{num: int32(num), src: src, at: int32(at)})
}

// root records object num as a page tree's root.
func (t *pageTree) root(num int) {
	if slices.Contains(t.roots, num) {
		return
	}
	if len(t.roots) >= maxRoots {
		t.full = true
		return
	}
	t.roots = append(t.roots, num)
}

// kidsArray records object num as one a /Kids value refers to.
func (t *pageTree) kidsArray(num int) {
	t.full = t.full || !addTo(&t.kids, num)
}

// countObject records object num as one a /Count value refers to.
func (t *pageTree) countObject(num int) {
	t.full = t.full || !addTo(&t.counts, num)
}

// paramsObject records object num as one a /DecodeParms value refers to.
func (t *pageTree) paramsObject(num int) {
	t.full = t.full || !addTo(&t.params, num)
}

// addTo adds num to the set, made when nil, unless it holds maxIndirect numbers already.
func addTo(set *map[int]struct{}, num int) bool {
	if *set == nil {
		*set = map[int]struct{}{}
	}
	if len(*set) >= maxIndirect {
		return false
	}
	(*set)[num] = struct{}{}
	return true
}

// statedCounts is the largest count that the objects /Count values refer to state: the
// integer that a definition of one is, or refers to through a chain of references (countOf),
// at most MaxCount. It is false when a definition is in an object stream that is not held (its
// count cannot be read), or a chain is longer than maxChain. It is called once the walk has
// sorted the definitions (pages).
func (t *pageTree) statedCounts() (int, bool) {
	most := 0
	memo := map[int]int{}
	for num := range t.counts {
		n, ok := t.countOf(num, memo, 0)
		if !ok {
			return 0, false
		}
		most = max(most, n)
	}
	return most, true
}

// maxChain is the most references countOf follows from a /Count value's object: MuPDF, which
// reads a document's number of pages from its root's /Count, follows a chain of ten (a reader
// that follows none reads no count and walks the tree).
const maxChain = 32

// countOf is the largest integer a definition of object num is (none for one not defined,
// which readers read as null), or that the object a definition refers to is, followed through
// at most maxChain references; memo holds each object's once read (onPath while it is read).
// It is false when a definition is in an object stream that is not held, or the chain is
// longer or a cycle.
func (t *pageTree) countOf(num int, memo map[int]int, depth int) (int, bool) {
	if n, read := memo[num]; read {
		return n, n != onPath
	}
	if depth > maxChain {
		return 0, false
	}
	memo[num] = onPath
	most := 0
	first, found := t.definition(num)
	for k := first; found && k < len(t.defs) && int(t.defs[k].num) == num; k++ {
		d := t.defs[k]
		if d.src == leaf {
			return 0, false
		}
		def := t.sources[d.src][d.at:]
		i := skipSpace(def[:min(len(def), skipWindow)], 0)
		if ref, _, indirect := reference(def, i); indirect {
			n, ok := t.countOf(ref, memo, depth+1)
			if !ok {
				return 0, false
			}
			most = max(most, n)
		} else if i < len(def) && (digit(def[i]) || def[i] == '+') {
			most = max(most, readInt(def, i))
		}
	}
	memo[num] = most
	return most, true
}

// indexFile records the definitions of the objects written in data as they are: every "obj"
// keyword after two integers (whitespace between them, and none needed before "obj"), and
// those its cross-reference tables place (indexXref).
func (t *pageTree) indexFile(data []byte) {
	src := t.source(data)
	t.indexXref(data, src)
	for i := 0; ; i += 3 {
		k := bytes.Index(data[i:], []byte("obj"))
		if k < 0 {
			return
		}
		i += k
		j := i
		for j > 0 && space(data[j-1]) {
			j--
		}
		gen := j
		for j > 0 && gen-j < 10 && digit(data[j-1]) {
			j--
		}
		if j == gen || j == 0 || !space(data[j-1]) {
			continue
		}
		for j > 0 && space(data[j-1]) {
			j--
		}
		end := j
		for j > 0 && end-j < 10 && digit(data[j-1]) {
			j--
		}
		if j == end || (j > 0 && digit(data[j-1])) {
			continue
		}
		t.define(readNumber(data, j), src, i+3)
	}
}

// indexXref records the definitions a classic cross-reference table of data (the text after
// each "xref" keyword: subsections of a first object number and a count, then an entry of an
// offset, a generation and n or f for each object) places: for each entry in use whose offset
// starts an object's header, a definition of the entry's object number. A reader finds an
// object by its entry, and the header there may be read otherwise from the file's text alone
// ("12 0 obj" is object 2 for a reader sent to its second digit), which indexFile misses.
func (t *pageTree) indexXref(data []byte, src int32) {
	for i := 0; ; i += 4 {
		k := bytes.Index(data[i:], []byte("xref"))
		if k < 0 {
			return
		}
		i += k
		if i > 0 && regular(data[i-1]) { // startxref
			continue
		}
		t.xrefSection(data, src, i+4)
	}
}

// xrefSection reads the subsections of a cross-reference table from data[i] on (data being
// sources[src]).
func (t *pageTree) xrefSection(data []byte, src int32, i int) {
	for {
		var first, count int
		var ok bool
		if first, i, ok = xrefInt(data, i); !ok {
			return
		}
		if count, i, ok = xrefInt(data, i); !ok {
			return
		}
		for num := first; num < first+count; num++ {
			var offset int
			if offset, i, ok = xrefInt(data, i); !ok {
				return
			}
			if _, i, ok = xrefInt(data, i); !ok {
				return
			}
			i = skipSpace(data, i)
			if i >= len(data) || (data[i] != 'n' && data[i] != 'f') {
				return
			}
			if data[i] == 'n' && offset < len(data) {
				if after, ok := headerAt(data, offset); ok {
					t.define(num, src, after)
				}
			}
			i++
		}
	}
}

// indexXrefStream records the definitions a cross-reference stream (PDF 1.5 on) places, as
// indexXref does a table's: its dictionary is dict, its data starts at data[start], and what
// it inflates to is taken from budget (at most objectStreamCeiling). A stream no reader reads
// as one (no /W of three numbers, an empty offset field, data that does not inflate) is left
// out, as readers then find the objects by their headers, which indexFile records. Each entry
// is read as qpdf reads it and as pdf.js does (entryOffsets). It is false when the stream is
// one whose entries readers read but this cannot (another filter, a predictor that cannot be
// undone, decode parameters that cannot be resolved, a /W or /Index given by a reference, an
// inflate bound reached): an entry may place an object where no header shows it (gluedNode),
// and the walk would miss its pages.
func (t *pageTree) indexXrefStream(data, dict []byte, start int, budget *int) bool {
	x, ok := readXrefDict(dict)
	if x.unsure {
		return false
	}
	if !ok {
		return true
	}
	if !x.flate && !x.raw {
		return false
	}
	if x.predictor, ok = t.streamPredictor(dict); !ok && !x.raw {
		return false
	}
	rows, ok := inflateXref(data[start:], x, budget)
	if !ok {
		return rows == nil
	}
	width := x.w[0] + x.w[1] + x.w[2]
	k := 0
	for s := 0; s+1 < len(x.index); s += 2 {
		for num := x.index[s]; num < x.index[s]+x.index[s+1] && (k+1)*width <= len(rows); num++ {
			if t.entries++; t.entries > maxXrefEntries {
				t.full = true // the entries past it could place a node no header shows
				return true
			}
			row := rows[k*width : (k+1)*width]
			k++
			for _, offset := range entryOffsets(row, x.w) {
				if offset >= 0 && offset < len(data) {
					if after, ok := headerAt(data, offset); ok {
						t.define(num, 0, after)
					}
				}
			}
		}
	}
	return true
}

// xrefDict is what a cross-reference stream's dictionary says of its data: the widths of an
// entry's fields (/W), the object numbers its entries are for (/Index, pairs of a first number
// and a count; [0 /Size] by default), and its predictor (pageTree.streamPredictor). Its
// entries follow each other in the data, whatever the predictor's rows are.
type xrefDict struct {
	w         [3]int
	index     []int
	predictor predictor
	// raw is set when the data has no filter, flate when it has FlateDecode alone.
	raw, flate bool
	// unsure is set when the dictionary says /Type /XRef or gives a /W, and gives its /W or
	// /Index, or one of the first three widths, by a reference, which readers may resolve and
	// this does not.
	unsure bool
}

// readXrefDict reads a cross-reference stream's dictionary (/Type /XRef, or any stream's that
// gives a /W: pdf.js reads the stream at a startxref's offset as one whatever its /Type), and
// whether it is one a reader reads: a /W whose first three elements are numbers (readWidths),
// the second not zero, its object numbers given.
func readXrefDict(dict []byte) (xrefDict, bool) {
	var x xrefDict
	size, widths, xref, unsure := -1, false, false, false
	var filters []name
	for i := 0; i < len(dict); i++ {
		if dict[i] != '/' {
			continue
		}
		nm, end := readName(dict, i)
		j := skipSpace(dict, end)
		switch {
		case nm.is("Type"):
			next, _ := readName(dict, j)
			xref = xref || next.is("XRef")
		case nm.is("W"):
			var sure bool
			x.w, widths, sure = readWidths(dict, j)
			unsure = unsure || !sure
			xref = true
		case nm.is("Index"):
			if _, _, indirect := reference(dict, j); indirect {
				unsure = true
			}
			x.index = intArray(dict, j)
		case nm.is("Size"):
			size = readInt(dict, j)
		case nm.is("Filter"):
			filters = append(filters, filterNames(dict, j)...)
		}
	}
	if x.index == nil && size >= 0 {
		x.index = []int{0, size}
	}
	x.unsure = xref && unsure
	x.raw = len(filters) == 0
	x.flate = len(filters) == 1 && filters[0].is("FlateDecode")
	return x, widths && x.w[1] > 0 && xref && x.index != nil
}

// readWidths reads the /W value at b[i]: the first three elements of an array, and whether
// they are numbers readers take for widths (ok), and whether they could be read with certainty
// (sure: neither the array nor one of them is a reference). qpdf and pdf.js read the first three
// elements of a longer array, and pdf.js takes a real of no fraction (4.0) for an integer;
// qpdf refuses a width of more than eight bytes, which pdf.js reads (entryOffsets).
func readWidths(b []byte, i int) (w [3]int, ok, sure bool) {
	if _, _, indirect := reference(b, i); indirect {
		return w, false, false
	}
	if i >= len(b) || b[i] != '[' {
		return w, false, true
	}
	i++
	for k := range w {
		i = skipSpace(b, i)
		if _, _, indirect := reference(b, i); indirect {
			return w, false, false
		}
		var whole bool
		if w[k], i, whole = wholeNumber(b, i); !whole {
			return w, false, true // no number, a negative one or a fraction
		}
	}
	return w, true, true
}

// wholeNumber reads the number at b[i] as readers take it for an integer (a sign of +, and a
// fraction of zeros, which pdf.js's Number.isInteger takes: 4.0), and the index after it; ok is
// false for anything else (a negative number, a fraction, no number).
func wholeNumber(b []byte, i int) (n, next int, ok bool) {
	if i < len(b) && b[i] == '+' {
		i++
	}
	start := i
	for i < len(b) && digit(b[i]) {
		i++
	}
	if i == start && (i >= len(b) || b[i] != '.') {
		return 0, i, false
	}
	n = readNumber(b, start)
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] == '0'; i++ {
		}
	}
	return n, i, i >= len(b) || !regular(b[i])
}

// intArray is the whole numbers (wholeNumber) of the array at b[i], up to its first element
// that is none (nil for none, or anything but an array).
func intArray(b []byte, i int) []int {
	if i >= len(b) || b[i] != '[' {
		return nil
	}
	var ints []int
	for i = skipSpace(b, i+1); i < len(b); i = skipSpace(b, i) {
		n, next, ok := wholeNumber(b, i)
		if !ok {
			break
		}
		ints = append(ints, n)
		i = next
	}
	return ints
}

// inflateXref is a cross-reference stream's entries: its data inflated (within budget, at
// most objectStreamCeiling), its predictor undone; or, when it cannot be, nil for data that
// does not inflate (which no reader reads either), the data read so far for a bound reached.
func inflateXref(data []byte, x xrefDict, budget *int) ([]byte, bool) {
	if x.raw {
		// The entries are the file's bytes, read in place: decode parameters belong to a filter.
		return data, true
	}
	r, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, false
	}
	limit := min(*budget, objectStreamCeiling)
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	*budget -= min(len(out), limit)
	if len(out) > limit {
		return out[:0], false
	}
	if err != nil && len(out) == 0 {
		return nil, false
	}
	return x.predictor.undo(out), true
}

// entryOffsets are the offsets at which the cross-reference stream entry row, of fields of
// widths w, places an object (a type of 1, or no type field): as qpdf reads its fields
// (big-endian numbers of up to eight bytes), and as pdf.js does (any width, each field's low
// 32 bits as a signed number), when that differs. A type that is not 1 places none.
func entryOffsets(row []byte, w [3]int) []int {
	kind, offset := 1, field(row[w[0]:w[0]+w[1]])
	if w[0] > 0 {
		kind = field(row[:w[0]])
	}
	var offsets []int
	if kind == 1 && w[0] <= 8 && w[1] <= 8 {
		offsets = append(offsets, offset)
	}
	if low := int(int32(uint32(offset))); int32(uint32(kind)) == 1 && (len(offsets) == 0 || low != offset) {
		offsets = append(offsets, low)
	}
	return offsets
}

// field is the big-endian number in b (its low 64 bits, for more than eight bytes).
func field(b []byte) int {
	n := 0
	for _, c := range b {
		n = n<<8 | int(c)
	}
	return n
}

// xrefInt reads the integer (at most ten digits) after whitespace at data[i], and the index
// after it.
func xrefInt(data []byte, i int) (int, int, bool) {
	i = skipSpace(data[:min(len(data), i+skipWindow)], i)
	start := i
	for i < len(data) && i-start < 10 && digit(data[i]) {
		i++
	}
	return readNumber(data, start), i, i > start
}

// headerAt is the index after the "obj" of the object header (two integers and obj,
// whitespace before and between them) at data[i], if there is one.
func headerAt(data []byte, i int) (int, bool) {
	for range 2 {
		var ok bool
		if _, i, ok = xrefInt(data, i); !ok {
			return 0, false
		}
	}
	i = skipSpace(data[:min(len(data), i+skipWindow)], i)
	if !bytes.HasPrefix(data[i:], []byte("obj")) {
		return 0, false
	}
	return i + 3, true
}

// indexObjectStream records the definitions of the objects in an object stream whose
// inflated data is objects and whose dictionary is dict: its header's pairs of an object
// number and an offset from /First, /N of them; inflated says whether objects were inflated
// (pageTree.hold) or are a part of the file. A header that cannot be read leaves the
// stream's objects out, as readers do (they find none of them); one whose /First or /N is
// uncertain (objectStreamHead) makes the walk not established.
func (t *pageTree) indexObjectStream(dict, objects []byte, inflated bool) {
	first, n, ok, unsure := objectStreamHead(dict)
	t.full = t.full || unsure
	if !ok || first > len(objects) {
		return
	}
	i, src := 0, int32(-1)
	for range n {
		var pair [2]int
		for k := range pair {
			i = skipSpace(objects[:first], i)
			start := i
			for i < first && i-start < 10 && digit(objects[i]) {
				i++
			}
			if i == start {
				return
			}
			pair[k] = readNumber(objects, start)
		}
		if first+pair[1] > len(objects) {
			return
		}
		if src == -1 && inflated {
			src = t.hold(objects)
		} else if src == -1 {
			src = t.source(objects) // a part of the file, held anyway
		}
		if src == leaf {
			t.keepArray(pair[0], objects, first+pair[1])
		} else {
			t.define(pair[0], src, first+pair[1])
		}
	}
}

// keepArray records object num, defined at objects[at] in an object stream that is not held:
// as a leaf, or, when it is an array that starts with a reference or is empty (one a /Kids
// value may refer to, in a stream that says no /Kids itself), by a copy of it up to its first ]
// in arrays, so that the walk can read it once the stream is dropped. The copies count with
// the held streams' bytes (retainCeiling), the bytes looked through for their ends with
// arraySearch. Another array is a leaf: as kids, it would make the count not established, as
// a direct /Kids holding something but references does. A number or a reference is kept too
// (keepNumber, keep), and a dictionary a /DecodeParms value refers to (keepDictionary).
func (t *pageTree) keepArray(num int, objects []byte, at int) {
	i := skipSpace(objects[:min(len(objects), at+skipWindow)], at)
	if _, params := t.params[num]; params && bytes.HasPrefix(objects[i:], []byte("<<")) {
		t.keepDictionary(num, objects[i:])
		return
	}
	if _, next, ref := reference(objects, i); ref {
		t.keep(num, objects[i:next])
		return
	} else if i < len(objects) && (digit(objects[i]) || objects[i] == '+' || objects[i] == '-') {
		t.keepNumber(num, objects, i)
		return
	}
	if i >= len(objects) || objects[i] != '[' {
		t.define(num, leaf, 0)
		return
	}
	if j := skipSpace(objects[:min(len(objects), i+1+skipWindow)], i+1); j < len(objects) && objects[j] != ']' {
		if _, _, ok := reference(objects, j); !ok {
			t.define(num, leaf, 0)
			return
		}
	}
	window := objects[i:min(len(objects), i+arraySearch-t.searched)]
	end := bytes.IndexByte(window, ']')
	if end < 0 {
		t.searched += len(window)
		t.full = t.full || t.searched >= arraySearch
		t.define(num, leaf, 0) // no array a reader would read
		return
	}
	t.searched += end + 1
	if t.held += end + 1; t.held > retainCeiling {
		t.full = true
		return
	}
	if t.arraysSrc == 0 {
		t.arraysSrc = t.source(nil)
	}
	t.define(num, t.arraysSrc, len(t.arrays))
	t.arrays = append(append(t.arrays, window[:end+1]...), '\n')
}

// keepNumber records object num, a number at objects[i] in an object stream that is not held,
// by a copy of its sign and digits (at most twenty bytes) in arrays (keep).
func (t *pageTree) keepNumber(num int, objects []byte, i int) {
	end := i + 1
	for end < len(objects) && end-i < 20 && (digit(objects[end]) || objects[end] == '.') {
		end++
	}
	t.keep(num, objects[i:end])
}

// keepDictionary records object num, a dictionary that def starts with in an object stream
// that is not held and that a /DecodeParms value refers to, by a copy of it (at most
// dictWindow bytes; a longer one, or one that cannot be read, is a leaf, which resolveParams
// does not resolve) in arrays (keep), so that a stream's decode parameters can be resolved.
func (t *pageTree) keepDictionary(num int, def []byte) {
	p := parser{b: def[:min(len(def), dictWindow)]}
	if !p.value(0) {
		t.define(num, leaf, 0)
		return
	}
	t.keep(num, def[:p.i])
}

// keep records object num, in an object stream that is not held, by a copy of its definition
// def (a number, or a reference to another object) in arrays, as keepArray does an array, so
// that a /Count that refers to it can be read (pageTree.statedCounts).
func (t *pageTree) keep(num int, def []byte) {
	if t.held += len(def) + 1; t.held > retainCeiling {
		t.full = true
		return
	}
	if t.arraysSrc == 0 {
		t.arraysSrc = t.source(nil)
	}
	t.define(num, t.arraysSrc, len(t.arrays))
	t.arrays = append(append(t.arrays, def...), '\n')
}

// hold adds an object stream's inflated data to the sources, and is its index; or leaf, when
// the data holds neither "/Kids" nor a # (which could spell it), so that none of its objects
// is a page tree node, and it is not held; past retainCeiling held, the walk is not
// established.
func (t *pageTree) hold(objects []byte) int32 {
	if !bytes.Contains(objects, []byte("/Kids")) && bytes.IndexByte(objects, '#') < 0 {
		return leaf
	}
	if t.held += len(objects); t.held > retainCeiling {
		t.full = true
	}
	return t.source(objects)
}

// objectStreamHead is an object stream's /First and /N, from its dictionary dict: each must
// be given once (or with one value), as a direct integer. unsure is set when one is given by
// a reference (which readers follow, and this does not) or twice with different values: the
// stream's objects may then be elsewhere than this would read them.
func objectStreamHead(dict []byte) (first, n int, ok, unsure bool) {
	first, n = -1, -1
	for i := 0; i < len(dict); i++ {
		if dict[i] != '/' {
			continue
		}
		nm, end := readName(dict, i)
		if !nm.is("First") && !nm.is("N") {
			continue
		}
		j := skipSpace(dict, end)
		if _, _, indirect := reference(dict, j); indirect {
			return 0, 0, false, true
		}
		if j >= len(dict) || !digit(dict[j]) {
			return 0, 0, false, false
		}
		v, slot := readNumber(dict, j), &first
		if nm.is("N") {
			slot = &n
		}
		if *slot >= 0 && *slot != v {
			return 0, 0, false, true
		}
		*slot = v
	}
	return first, n, first >= 0 && n >= 0, false
}

// pages is the most pages a reader walking the page tree from any of its roots finds, and
// whether the walk could be done within its bounds. A reader takes each leaf of the tree for
// a page, whatever a node's /Count states and whether or not the leaf says /Type /Page or has
// /Contents: a root that states /Count 1 can hold a hundred blank pages.
func (t *pageTree) pages() (int, bool) {
	if t.full {
		return 0, false
	}
	if t.arraysSrc > 0 {
		t.sources[t.arraysSrc] = t.arrays
	}
	// By number, then by place, so that a definition found twice (by its header and by a
	// cross-reference entry) is read once where that matters (arrayKids).
	slices.SortFunc(t.defs, func(a, b definition) int {
		return cmp.Or(cmp.Compare(a.num, b.num), cmp.Compare(a.src, b.src), cmp.Compare(a.at, b.at))
	})
	w := walk{tree: t, memo: make([]int32, len(t.defs))}
	most := 0
	for _, num := range t.roots {
		most = max(most, w.leaves(num, 0))
	}
	if len(t.roots) == 0 || t.directRoot {
		for num := range t.kids {
			if _, read := w.arrays[num]; !read {
				return 0, false
			}
		}
	}
	return most, !w.failed
}

// walk is one walk of a page tree.
type walk struct {
	tree *pageTree
	// memo is, at the index of an object's first definition, the leaves under it plus one
	// once walked, or onPath while it is walked, so that a cycle (which readers refuse or
	// stop at) is not followed.
	memo []int32
	// spent is the bytes parsed and kids visited; failed is set when a bound is reached or a
	// node's dictionary cannot be read.
	spent  int
	failed bool
	// arrays are the objects read as the kids of a node whose /Kids refers to them.
	arrays map[int]struct{}
}

// onPath marks an object being walked in walk.memo.
const onPath = -1

// leaves is the pages under object num: for a dictionary with /Kids, the sum of its kids'
// (at least one: a reader may take a node that also says /Type /Page for a page), for any
// other object or one not defined, one. An object defined more than once counts as its
// definition with the most.
func (w *walk) leaves(num, depth int) int {
	defs := w.tree.defs
	first, found := w.tree.definition(num)
	if !found {
		return 1
	}
	switch m := w.memo[first]; {
	case m > 0:
		return int(m) - 1
	case m == onPath || w.failed:
		return 0
	}
	if depth > maxDepth {
		w.failed = true
		return 0
	}
	w.memo[first] = onPath
	most := 1
	for k := first; k < len(defs) && int(defs[k].num) == num; k++ {
		if defs[k].src == leaf {
			continue // one page at most
		}
		kids, ok := w.kidsOf(w.tree.sources[defs[k].src][defs[k].at:])
		if !ok {
			w.failed = true
			break
		}
		sum := 0
		for _, kid := range kids {
			if w.spent++; w.spent > walkBudget {
				w.failed = true
				break
			}
			sum = min(sum+w.leaves(kid, depth+1), MaxCount)
		}
		most = max(most, sum)
	}
	w.memo[first] = int32(most) + 1
	return most
}

// definition is the index in defs of the first definition of object num, and whether there is
// one.
func (t *pageTree) definition(num int) (int, bool) {
	return slices.BinarySearchFunc(t.defs, num, func(d definition, n int) int { return cmp.Compare(int(d.num), n) })
}

// kidsOf is the object numbers of the /Kids of the dictionary that def starts with (after
// whitespace and comments): every array of references a /Kids key of it holds, directly or in
// the object a reference names (arrayKids), in order; none for an object that is no
// dictionary. It is false when the dictionary cannot be read, holds /Kids as anything but an
// array of references or a reference to one, or the walk's budget is spent.
func (w *walk) kidsOf(def []byte) ([]int, bool) {
	if w.spent >= walkBudget {
		return nil, false
	}
	p := parser{b: def[:min(len(def), walkBudget-w.spent)]}
	defer func() { w.spent += p.i }()
	p.space()
	if !p.at("<<") {
		return nil, true
	}
	p.i += 2
	var kids []int
	for {
		p.space()
		if p.at(">>") {
			p.i += 2
			return kids, true
		}
		if p.i >= len(p.b) || p.b[p.i] != '/' {
			return nil, false
		}
		key, end := readName(p.b, p.i)
		p.i = end
		p.space()
		if !key.is("Kids") {
			if !p.value(0) {
				return nil, false
			}
			continue
		}
		var refs []int
		var ok bool
		if num, next, indirect := reference(p.b, p.i); indirect {
			p.i = next
			refs, ok = w.arrayKids(num)
		} else {
			refs, ok = p.references()
		}
		if !ok {
			return nil, false
		}
		kids = append(kids, refs...)
	}
}

// arrayKids is the object numbers in object num, which a /Kids value refers to: the
// references of each of its definitions that is an array, in order (a definition that is no
// array, text that only looks like the object's header, is passed over; one found twice is
// read once). It is false when no
// definition is an array, one is an array of anything but references, or the walk's budget is
// spent: a reader finds no kids there.
func (w *walk) arrayKids(num int) ([]int, bool) {
	if w.arrays == nil {
		w.arrays = map[int]struct{}{}
	}
	w.arrays[num] = struct{}{}
	defs := w.tree.defs
	first, found := w.tree.definition(num)
	var kids []int
	arrays := 0
	for k := first; found && k < len(defs) && int(defs[k].num) == num; k++ {
		if defs[k].src == leaf || k > first && defs[k] == defs[k-1] {
			continue // no array (keepArray), or one read already
		}
		if w.spent >= walkBudget {
			return nil, false
		}
		def := w.tree.sources[defs[k].src][defs[k].at:]
		p := parser{b: def[:min(len(def), walkBudget-w.spent)]}
		p.space()
		if !p.at("[") {
			w.spent += p.i
			continue
		}
		refs, ok := p.references()
		w.spent += p.i
		if !ok {
			return nil, false
		}
		kids = append(kids, refs...)
		arrays++
	}
	return kids, arrays > 0
}

// parser reads PDF objects from b, at i.
type parser struct {
	b []byte
	i int
}

// at reports whether s is at p.i.
func (p *parser) at(s string) bool {
	return len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s
}

// space skips whitespace and comments.
func (p *parser) space() {
	p.i = skipSpace(p.b, p.i)
}

// references reads an array of indirect references, and its object numbers.
func (p *parser) references() ([]int, bool) {
	if !p.at("[") {
		return nil, false
	}
	p.i++
	var nums []int
	for {
		p.space()
		if p.at("]") {
			p.i++
			return nums, true
		}
		num, next, ok := reference(p.b, p.i)
		if !ok {
			return nil, false
		}
		nums = append(nums, num)
		p.i = next
	}
}

// value skips one object (a reference is read as three: two numbers and R) nested depth
// arrays and dictionaries deep, and reports whether it could be read.
func (p *parser) value(depth int) bool {
	switch {
	case p.i >= len(p.b) || depth > maxNesting:
		return false
	case p.at("<<"):
		p.i += 2
		for p.space(); !p.at(">>"); p.space() {
			if p.i >= len(p.b) || !p.value(depth+1) {
				return false
			}
		}
		p.i += 2
	case p.at("["):
		p.i++
		for p.space(); !p.at("]"); p.space() {
			if p.i >= len(p.b) || !p.value(depth+1) {
				return false
			}
		}
		p.i++
	case p.at("("):
		return p.literalString()
	case p.at("<"):
		for p.i++; p.i < len(p.b) && p.b[p.i] != '>'; p.i++ {
		}
		if p.i >= len(p.b) {
			return false
		}
		p.i++
	case p.b[p.i] == '/':
		_, p.i = readName(p.b, p.i)
	case regular(p.b[p.i]):
		if _, next, ok := reference(p.b, p.i); ok {
			p.i = next
			return true
		}
		// A number, a keyword (true, false, null) or anything else a reader may take.
		for p.i < len(p.b) && regular(p.b[p.i]) {
			p.i++
		}
	default:
		return false // a stray ), ], >, { or }
	}
	return true
}

// literalString skips a string in parentheses: balanced ones within it, a backslash escaping
// the byte after it.
func (p *parser) literalString() bool {
	depth := 0
	for ; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case '\\':
			p.i++
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				p.i++
				return true
			}
		}
	}
	return false
}

// digit reports whether c is a decimal digit.
func digit(c byte) bool {
	return c >= '0' && c <= '9'
}
