package pdfpages

// maxResolved is the most indirect /DecodeParms values one file's streams may have resolved
// (pageTree.resolveParams looks through every definition for each).
const maxResolved = 64

// predictor is how a stream's data was predicted before it was compressed, as its decode
// parameters (/DecodeParms) say: /Predictor (1 none, 2 TIFF, 10 to 15 PNG), and the pixels it
// works on, of /Colors components of /BitsPerComponent bits each, /Columns of them a row.
type predictor struct {
	kind, colors, bits, columns int
}

// noPredictor is a stream's predictor when its dictionary states none.
var noPredictor = predictor{kind: 1, colors: 1, bits: 8, columns: 1}

// readPredictor reads the decode parameters of the stream whose dictionary (or whose decode
// parameters' dictionary, resolved) is dict: its predictor, the object number its
// /DecodeParms refers to when it does so by a reference (ref, -1 for none), and whether the
// parameters can be undone: a PNG or TIFF predictor, components of 1, 2, 4, 8 or 16 bits, each
// value a direct integer (one given by a reference is not read, so that the data is not
// undone otherwise than a reader undoes it).
func readPredictor(dict []byte) (p predictor, ref int, ok bool) {
	p, ref, ok = noPredictor, -1, true
	for i := 0; i < len(dict); i++ {
		if dict[i] != '/' {
			continue
		}
		nm, end := readName(dict, i)
		j := skipSpace(dict, end)
		slot := (*int)(nil)
		switch {
		case nm.is("DecodeParms"):
			if j < len(dict) && dict[j] == '[' {
				j = skipSpace(dict, j+1)
			}
			if num, _, indirect := reference(dict, j); indirect {
				ref = num
			}
			continue
		case nm.is("Predictor"):
			slot = &p.kind
		case nm.is("Colors"):
			slot = &p.colors
		case nm.is("BitsPerComponent"):
			slot = &p.bits
		case nm.is("Columns"):
			slot = &p.columns
		default:
			continue
		}
		if _, _, indirect := reference(dict, j); indirect || j >= len(dict) || !digit(dict[j]) {
			ok = false
			continue
		}
		*slot = readInt(dict, j)
	}
	ok = ok && (p.kind == 1 || p.kind == 2 || p.kind >= 10 && p.kind <= 15) &&
		p.colors >= 1 && p.columns >= 1 && (p.bits == 1 || p.bits == 2 || p.bits == 4 || p.bits == 8 || p.bits == 16)
	return p, ref, ok
}

// rowBytes is the bytes of a row of the predictor's pixels (without a PNG filter byte), and
// pixelBytes the bytes of a pixel, at least one, which PNG's filters look back by.
func (p predictor) rowBytes() int   { return (p.colors*p.bits*p.columns + 7) / 8 }
func (p predictor) pixelBytes() int { return max(1, (p.colors*p.bits+7)/8) }

// undo is b with the predictor undone, in place: the rows of pixels without PNG's filter
// bytes, a last partial row dropped (as readers drop it).
func (p predictor) undo(b []byte) []byte {
	switch width := p.rowBytes(); {
	case p.kind == 1:
		return b
	case width > len(b):
		return b[:0]
	case p.kind == 2:
		return untiff(b, width, p)
	default:
		return unpredict(b, width, p.pixelBytes())
	}
}

// untiff undoes TIFF predictor 2 on rows of width bytes, in place: each component of a row but
// its first pixel's is its difference, modulo 2 to the component's bits, from the same
// component of the pixel to its left. A last row shorter than width is dropped, as unpredict
// drops it.
func untiff(b []byte, width int, p predictor) []byte {
	b = b[:len(b)-len(b)%width]
	for k := 0; k < len(b); k += width {
		row := b[k : k+width]
		switch p.bits {
		case 8:
			for i := p.colors; i < width; i++ {
				row[i] += row[i-p.colors]
			}
		case 16:
			for i := p.colors; 2*i+1 < width; i++ {
				v := uint16(row[2*i])<<8 | uint16(row[2*i+1])
				v += uint16(row[2*(i-p.colors)])<<8 | uint16(row[2*(i-p.colors)+1])
				row[2*i], row[2*i+1] = byte(v>>8), byte(v)
			}
		default:
			untiffBits(row, p)
		}
	}
	return b
}

// untiffBits undoes TIFF predictor 2 on one row of components of fewer than eight bits,
// packed from each byte's high bits on.
func untiffBits(row []byte, p predictor) {
	mask := byte(1)<<p.bits - 1
	get := func(c int) byte {
		bit := c * p.bits
		return row[bit/8] >> (8 - p.bits - bit%8) & mask
	}
	for c := p.colors; c < p.colors*p.columns; c++ {
		v := (get(c) + get(c-p.colors)) & mask
		bit := c * p.bits
		shift := 8 - p.bits - bit%8
		row[bit/8] = row[bit/8]&^(mask<<shift) | v<<shift
	}
}

// unpredict undoes PNG predictors (pixels of bpp bytes) on rows of width bytes, each after its
// filter byte, in place: the rows without their filter bytes.
func unpredict(b []byte, width, bpp int) []byte {
	rows := b[:0]
	prev := make([]byte, width)
	for k := 0; k+width+1 <= len(b); k += width + 1 {
		filter, row := b[k], b[k+1:k+1+width]
		for i := range row {
			var left, upLeft byte
			if i >= bpp {
				left, upLeft = row[i-bpp], prev[i-bpp]
			}
			switch filter {
			case 1:
				row[i] += left
			case 2:
				row[i] += prev[i]
			case 3:
				row[i] += byte((int(left) + int(prev[i])) / 2)
			case 4:
				row[i] += paeth(left, prev[i], upLeft)
			}
		}
		copy(prev, row)
		rows = append(rows, row...)
	}
	return rows
}

// paeth is the PNG Paeth predictor of a byte from the bytes to its left, above and above left.
func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

// abs is the absolute value of n.
func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// streamPredictor is the predictor of the stream whose dictionary is dict, its /DecodeParms
// resolved when they are given by a reference (resolveParams), and whether it can be undone.
func (t *pageTree) streamPredictor(dict []byte) (predictor, bool) {
	p, ref, ok := readPredictor(dict)
	if !ok || ref < 0 {
		return p, ok
	}
	params, found := t.resolveParams(ref)
	if !found {
		return predictor{}, false
	}
	p, ref, ok = readPredictor(params)
	return p, ok && ref < 0
}

// resolveParams is the dictionary that object num is defined as, among the definitions read so
// far, and whether there is exactly one such dictionary (its definitions may repeat it: a
// header and a cross-reference entry), within dictWindow bytes, and no definition is anything
// else or in an object stream not held (a leaf, whose dictionary is not kept: keepDictionary);
// at most maxResolved are looked for in a file. It is called once the streams whose
// parameters are direct have been read (readDeferred).
func (t *pageTree) resolveParams(num int) ([]byte, bool) {
	if t.resolved++; t.resolved > maxResolved {
		return nil, false
	}
	var found []byte
	for _, d := range t.defs {
		if int(d.num) != num {
			continue
		}
		if d.src == leaf {
			return nil, false
		}
		src := t.sources[d.src]
		if t.arraysSrc > 0 && d.src == t.arraysSrc {
			src = t.arrays // the walk's source once it starts (pageTree.pages)
		}
		def := src[d.at:]
		p := parser{b: def[:min(len(def), dictWindow)]}
		p.space()
		start := p.i
		if !p.at("<<") || !p.value(0) {
			return nil, false
		}
		if found != nil && string(found) != string(p.b[start:p.i]) {
			return nil, false
		}
		found = p.b[start:p.i]
	}
	return found, found != nil
}

// deferredStream is a stream of the file as Read finds it: its dictionary, where its data
// starts in the file, its inflated data when it is an object stream (objects, nil otherwise),
// and whether nothing of it was inflated (raw: no filter, or a stream left compressed); params
// is the dictionary its decode parameters were resolved as, when they are given by a
// reference.
type deferredStream struct {
	dict    []byte
	start   int
	objects []byte
	raw     bool
	params  []byte
}

// predictedByReference reports whether s is an object stream or a compressed cross-reference
// stream, whose predictor is undone, and its decode parameters are given by a reference (the
// parameters of another stream, an image's, are not read).
func (s deferredStream) predictedByReference() bool {
	if _, ref, _ := readPredictor(s.dict); ref < 0 {
		return false
	}
	x, xref := readXrefDict(s.dict)
	return s.objects != nil || xref && !x.raw
}

// deferred reports whether the streams whose decode parameters are given by a reference, n of
// them so far, the last holding size bytes of inflated objects, are within their bounds: at
// most maxResolved streams (each resolves its parameters at least once), and retainCeiling
// bytes of objects held until they are read.
func (t *pageTree) deferred(n, size int) bool {
	t.waiting += size
	return n <= maxResolved && t.waiting <= retainCeiling
}

// readStream reads the stream s of data: its object stream's objects (its predictor undone)
// and its cross-reference stream's entries are indexed, and its objects scanned. It is false
// when the stream cannot be read with certainty (pageTree.undoPredictor,
// pageTree.indexXrefStream).
func (c *counter) readStream(data []byte, s deferredStream, budget *int) bool {
	objects := s.objects
	if objects != nil {
		var ok bool
		if objects, ok = c.tree.undoPredictor(s.dict, objects); !ok {
			return false
		}
	}
	if !c.tree.indexXrefStream(data, s.dict, s.start, budget) {
		return false
	}
	if objects != nil {
		c.tree.indexObjectStream(s.dict, objects, true)
	} else if s.raw {
		// An object stream without a filter holds its objects as they are (and they were
		// scanned with the file).
		c.tree.indexObjectStream(s.dict, data[s.start:], false)
	}
	c.scan(objects)
	return true
}

// readDeferred reads the streams whose decode parameters are given by a reference, once every
// other stream has been read, as readers resolve the reference wherever the object is: each
// whose parameters resolve among the definitions read so far (pageTree.resolveParams), in
// rounds, as one may define another's. It is false when a round reads none of those left, or
// when, all read, one's parameters no longer resolve to the dictionary it was read with (an
// object stream read after it defines the object otherwise: a decoy earlier in the file, which
// the reader's cross-reference does not name, could otherwise have its data misread and its
// pages missed).
func (c *counter) readDeferred(data []byte, deferred []deferredStream, budget *int) bool {
	pending := make([]int, len(deferred))
	for k := range pending {
		pending[k] = k
	}
	for len(pending) > 0 {
		var left []int
		for _, k := range pending {
			s := &deferred[k]
			_, ref, _ := readPredictor(s.dict)
			params, found := c.tree.resolveParams(ref)
			if !found {
				left = append(left, k)
				continue
			}
			s.params = params
			if !c.readStream(data, *s, budget) {
				return false
			}
		}
		if len(left) == len(pending) {
			return false
		}
		pending = left
	}
	for _, s := range deferred {
		_, ref, _ := readPredictor(s.dict)
		if params, found := c.tree.resolveParams(ref); !found || string(params) != string(s.params) {
			return false
		}
	}
	return true
}

// undoPredictor is the objects of an object stream whose dictionary is dict and whose
// inflated data is objects, its predictor undone, and whether it could be: a predictor that
// cannot be undone, or decode parameters given by a reference that cannot be resolved, make
// the count not established, as the stream's objects cannot be read.
func (t *pageTree) undoPredictor(dict, objects []byte) ([]byte, bool) {
	p, ok := t.streamPredictor(dict)
	if !ok {
		return nil, false
	}
	return p.undo(objects), true
}
