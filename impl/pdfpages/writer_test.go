package pdfpages_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pdftest"
)

// pdfFile writes a PDF for the tests as writers save them: objects, object streams, and
// cross-reference sections (tables, streams, or both in a hybrid file), each section placing
// the objects written since the one before it and pointing back at it (/Prev), as an
// incremental update does.
type pdfFile struct {
	b bytes.Buffer
	// offsets are where the objects written since the last section start; packed the object
	// stream and index of those written into object streams.
	offsets map[int]int
	packed  map[int][2]int
	// prev is the offset of the last section (-1: none yet).
	prev int
}

// newPDF starts a PDF with its header.
func newPDF() *pdfFile {
	f := &pdfFile{offsets: map[int]int{}, packed: map[int][2]int{}, prev: -1}
	f.b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	return f
}

// raw writes s as it is.
func (f *pdfFile) raw(s string) { f.b.WriteString(s) }

// obj writes object num with body.
func (f *pdfFile) obj(num int, body string) {
	f.offsets[num] = f.b.Len()
	fmt.Fprintf(&f.b, "%d 0 obj\n%s\nendobj\n", num, body)
}

// stream writes object num as a stream of data with the entries of dict (its /Length added).
func (f *pdfFile) stream(num int, dict string, data []byte) {
	f.offsets[num] = f.b.Len()
	fmt.Fprintf(&f.b, "%d 0 obj\n<< %s /Length %d >>\nstream\n", num, dict, len(data))
	f.b.Write(data)
	f.b.WriteString("\nendstream\nendobj\n")
}

// objStm writes object num as an object stream of bodies (objects first, first+1, ...),
// compressed after encode (nil: none) with the entries of dict beside its own.
func (f *pdfFile) objStm(num int, dict string, encode func([]byte) []byte, first int, bodies ...string) {
	var head, data strings.Builder
	for k, body := range bodies {
		fmt.Fprintf(&head, "%d %d ", first+k, data.Len())
		data.WriteString(body + "\n")
		f.packed[first+k] = [2]int{num, k}
	}
	raw := []byte(head.String() + data.String())
	if encode != nil {
		raw = encode(raw)
	}
	f.stream(num, fmt.Sprintf("/Type /ObjStm /N %d /First %d /Filter /FlateDecode %s", len(bodies), head.Len(), dict), pdftest.Deflate(raw))
}

// runs is the numbers of nums in runs of consecutive ones: pairs of a first number and a count.
func runs(nums []int) [][2]int {
	slices.Sort(nums)
	var out [][2]int
	for _, n := range nums {
		if len(out) > 0 && out[len(out)-1][0]+out[len(out)-1][1] == n {
			out[len(out)-1][1]++
		} else {
			out = append(out, [2]int{n, 1})
		}
	}
	return out
}

// table writes a cross-reference table of the objects written since the last section (object
// 0 free in the first), a trailer with the entries of trailer, and the end of the file.
func (f *pdfFile) table(size int, trailer string) {
	at := f.b.Len()
	nums := []int{}
	for n := range f.offsets {
		nums = append(nums, n)
	}
	if f.prev < 0 {
		nums = append(nums, 0)
	}
	f.b.WriteString("xref\n")
	for _, r := range runs(nums) {
		fmt.Fprintf(&f.b, "%d %d\n", r[0], r[1])
		for n := r[0]; n < r[0]+r[1]; n++ {
			if n == 0 {
				f.b.WriteString("0000000000 65535 f \n")
			} else {
				fmt.Fprintf(&f.b, "%010d 00000 n \n", f.offsets[n])
			}
		}
	}
	if f.prev >= 0 {
		trailer += fmt.Sprintf(" /Prev %d", f.prev)
	}
	fmt.Fprintf(&f.b, "trailer\n<< /Size %d %s >>\nstartxref\n%d\n%%%%EOF\n", size, trailer, at)
	f.prev = at
	clear(f.offsets)
	clear(f.packed)
}

// xrefStream writes object num as a cross-reference stream of the objects written since the
// last section and itself (of entries of a type byte, four bytes of offset and two of
// generation or index), compressed after encode (nil: none) with the entries of extra (its
// /DecodeParms; encode's alone when extra names a /Filter), and the end of the file; or, packedOnly, of the objects in object streams
// alone, without the end of the file (a hybrid file's, which its table's /XRefStm names).
func (f *pdfFile) xrefStream(num, size int, extra string, encode func([]byte) []byte, packedOnly bool) int {
	at := f.b.Len()
	nums := []int{}
	for n := range f.packed {
		nums = append(nums, n)
	}
	if !packedOnly {
		for n := range f.offsets {
			nums = append(nums, n)
		}
		nums = append(nums, num)
		f.offsets[num] = at
	}
	var rows []byte
	var index strings.Builder
	for _, r := range runs(nums) {
		fmt.Fprintf(&index, "%d %d ", r[0], r[1])
		for n := r[0]; n < r[0]+r[1]; n++ {
			if p, ok := f.packed[n]; ok {
				rows = append(rows, 2, 0, 0, byte(p[0]>>8), byte(p[0]), byte(p[1]>>8), byte(p[1]))
			} else {
				off := f.offsets[n]
				rows = append(rows, 1, byte(off>>24), byte(off>>16), byte(off>>8), byte(off), 0, 0)
			}
		}
	}
	dict := fmt.Sprintf("/Type /XRef /Size %d /W [1 4 2] /Index [%s] %s", size, index.String(), extra)
	data := rows
	switch {
	case encode != nil && strings.Contains(extra, "/Filter"):
		data = encode(rows) // another filter
	case encode != nil:
		data = pdftest.Deflate(encode(rows))
		dict += " /Filter /FlateDecode"
	}
	if f.prev >= 0 && !packedOnly {
		dict += fmt.Sprintf(" /Prev %d", f.prev)
	}
	f.offsets[num] = at
	fmt.Fprintf(&f.b, "%d 0 obj\n<< %s /Length %d >>\nstream\n", num, dict, len(data))
	f.b.Write(data)
	f.b.WriteString("\nendstream\nendobj\n")
	if !packedOnly {
		fmt.Fprintf(&f.b, "startxref\n%d\n%%%%EOF\n", at)
		f.prev = at
		clear(f.offsets)
		clear(f.packed)
	} else {
		delete(f.offsets, num)
		clear(f.packed)
	}
	return at
}

// bytes is the file.
func (f *pdfFile) bytes() []byte { return f.b.Bytes() }

// kidRefs is the references to objects first to first+n-1, as a /Kids array holds them.
func kidRefs(first, n int) string {
	var b strings.Builder
	b.WriteString("[")
	for k := range n {
		fmt.Fprintf(&b, " %d 0 R", first+k)
	}
	return b.String() + " ]"
}

// pngEncode predicts b with PNG filter (1 Sub, 2 Up, 3 Average, 4 Paeth) on rows of width
// bytes and pixels of bpp bytes, b padded with zeros to whole rows, each row after its filter
// byte.
func pngEncode(b []byte, width, bpp int, filter byte) []byte {
	b = append(b, make([]byte, (width-len(b)%width)%width)...)
	var out []byte
	prev := make([]byte, width)
	for k := 0; k < len(b); k += width {
		row := b[k : k+width]
		out = append(out, filter)
		for i := range row {
			var left, upLeft byte
			if i >= bpp {
				left, upLeft = row[i-bpp], prev[i-bpp]
			}
			predicted := map[byte]byte{1: left, 2: prev[i], 3: byte((int(left) + int(prev[i])) / 2), 4: paethOf(left, prev[i], upLeft)}[filter]
			out = append(out, row[i]-predicted)
		}
		prev = row
	}
	return out
}

// tiffEncode predicts b with TIFF predictor 2 on rows of columns pixels of colors components
// of bits bits each (rows of whole bytes), b padded with zeros to whole rows: each component
// after a row's first pixel becomes its difference from the same component a pixel to its
// left.
func tiffEncode(b []byte, colors, bits, columns int) []byte {
	width := (colors*bits*columns + 7) / 8
	b = append([]byte(nil), b...)
	b = append(b, make([]byte, (width-len(b)%width)%width)...)
	n := colors * columns
	get := func(row []byte, c int) int {
		v := 0
		for k := range bits {
			bit := c*bits + k
			v = v<<1 | int(row[bit/8]>>(7-bit%8)&1)
		}
		return v
	}
	set := func(row []byte, c, v int) {
		for k := range bits {
			bit := c*bits + k
			row[bit/8] = row[bit/8]&^(1<<(7-bit%8)) | byte(v>>(bits-1-k)&1)<<(7-bit%8)
		}
	}
	for k := 0; k < len(b); k += width {
		row := b[k : k+width]
		for c := n - 1; c >= colors; c-- {
			set(row, c, (get(row, c)-get(row, c-colors))&(1<<bits-1))
		}
	}
	return b
}

// qpdfPages is the number of pages qpdf finds in data (the pages of its JSON description, which
// walks the page tree, where --show-npages may answer the root's /Count), when qpdf is
// installed (ok false otherwise), so that the tests' files are known to have the pages they
// are said to have. Under CI=true (where .ci/run installs it) a missing qpdf fails the test.
func qpdfPages(t *testing.T, data []byte) (int, bool) {
	t.Helper()
	path, err := exec.LookPath("qpdf")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("qpdf is not installed (CI=true: .ci/run installs it): %v", err)
		}
		return 0, false
	}
	file := t.TempDir() + "/file.pdf"
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--json", "--json-key=pages", file).Output()
	var described struct {
		Pages []struct {
			Object string `json:"object"`
		} `json:"pages"`
	}
	if jsonErr := json.Unmarshal(out, &described); jsonErr != nil {
		t.Fatalf("qpdf: %v, %v: %q", err, jsonErr, out)
	}
	return len(described.Pages), true
}
