// Package pdftest builds small PDFs for tests: many pages in few bytes, as a compact or crafted
// document holds them, with the page objects in the file (Plain) or compressed in an object
// stream (ObjectStream), and one page whose compressed content stream shows much more text
// than the file's size (CompressedText). Every page of the first two shares one content
// stream, so a page costs a few dozen bytes. qpdf --check (qpdf 11) finds no error in any of
// them and counts their pages. ObjectStreamWith, UntypedPages and CompressedTextWith are
// crafted files that qpdf reads too (UntypedPages and BlankPages with a warning for each
// page), for the count's hostile cases.
package pdftest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"strings"
)

// content is the one content stream every page shows: a line of text.
const content = "BT /F1 12 Tf 72 720 Td (The same page again.) Tj ET"

// Plain is a PDF of n pages whose page objects are written in the file as they are.
func Plain(n int) []byte {
	w := newWriter()
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(2, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids(5, n), n))
	w.object(3, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	w.object(4, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i := range n {
		w.object(5+i, page())
	}
	return w.finish(5+n, 1)
}

// UntypedPages is a PDF of n pages whose page dictionaries have no /Type, as a crafted file's
// may (qpdf warns and takes each leaf of the page tree for a page, as readers do), with
// entries added to its page tree's dictionary.
func UntypedPages(n int, entries string) []byte {
	w := newWriter()
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(2, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d %s >>", kids(5, n), n, entries))
	w.object(3, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	w.object(4, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i := range n {
		w.object(5+i, strings.Replace(page(), "/Type /Page ", "", 1))
	}
	return w.finish(5+n, 1)
}

// BlankPages is a PDF of n blank pages whose dictionaries have neither /Type nor /Contents
// (a reader takes each leaf of the page tree for a page, and a provider bills its image), in
// a page tree of two levels (nodes of ten pages under the root) whose every node states a
// /Count of stated, as a crafted file's may: qpdf reads n pages (warning of each page's
// /Type). With decoy, a comment says "/Type /Page" once.
func BlankPages(n, stated int, decoy bool) []byte {
	w := newWriter()
	if decoy {
		w.buf.WriteString("% /Type /Page\n")
	}
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	nodes := (n + 9) / 10
	w.object(2, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids(3, nodes), stated))
	for i := range nodes {
		first, size := 3+nodes+10*i, min(10, n-10*i)
		w.object(3+i, fmt.Sprintf("<< /Type /Pages /Parent 2 0 R /Kids [%s] /Count %d >>", kids(first, size), stated))
		for k := range size {
			w.object(first+k, fmt.Sprintf("<< /Parent %d 0 R /MediaBox [0 0 612 792] >>", 3+i))
		}
	}
	return w.finish(3+nodes+n, 1)
}

// KidsArray is a PDF of n blank pages (no /Type, no /Contents, as BlankPages) under a root
// stating /Count 1, whose /Kids is an indirect reference to an array object of its own, as
// the specification allows any value to be (qpdf reads n pages). With packed, the array is
// compressed in an object stream (number 5, with a font and a cross-reference stream) that
// says /Kids nowhere, the page tree's root being in the file.
func KidsArray(n int, packed bool) []byte {
	w := newWriter()
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(2, "<< /Type /Pages /Kids 3 0 R /Count 1 >>")
	array := "[" + kids(6, n) + "]"
	if !packed {
		w.object(3, array)
	}
	for i := range n {
		w.object(6+i, "<< /Parent 2 0 R /MediaBox [0 0 612 792] >>")
	}
	if !packed {
		w.object(4, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
		w.object(5, "<< /Producer (pdftest) >>")
		return w.finish(6+n, 1)
	}
	body := "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\n" + array + "\n"
	header := fmt.Sprintf("4 0 3 %d ", strings.IndexByte(body, '\n')+1)
	data := Deflate([]byte(header + body))
	w.stream(5, fmt.Sprintf("<< /Type /ObjStm /N 2 /First %d /Filter /FlateDecode /Length %d >>", len(header), len(data)), data)
	return w.finishStream(6+n, []int{4, 3})
}

// FarNode is a PDF of n blank pages (as BlankPages) under a page tree node compressed in an
// object stream (number 5) past its first MiB, after a string of padding, the root and the
// pages being in the file, with a cross-reference stream (qpdf reads n pages). The node's
// offset in the stream is past a million, where a count of pages would be capped.
func FarNode(n int) []byte {
	w := newWriter()
	w.buf.WriteString("%" + strings.Repeat("c", 40<<10) + "\n") // a file large enough to inflate its stream
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	for i := range n {
		w.object(6+i, "<< /Parent 3 0 R /MediaBox [0 0 612 792] >>")
	}
	padding := "(" + strings.Repeat("x", 1100<<10) + ")\n"
	node := fmt.Sprintf("<< /Type /Pages /Parent 2 0 R /Kids [%s] /Count 1 >>\n", kids(6, n))
	header := fmt.Sprintf("4 0 3 %d ", len(padding))
	data := Deflate([]byte(header + padding + node))
	w.stream(5, fmt.Sprintf("<< /Type /ObjStm /N 2 /First %d /Filter /FlateDecode /Length %d >>", len(header), len(data)), data)
	return w.finishStream(6+n, []int{4, 3})
}

// ObjectStream is a PDF of n pages whose page objects and page tree are compressed
// (FlateDecode) in one object stream, with a cross-reference stream, as PDF 1.5 and later
// writers save them: no page dictionary, nor the page count, is in the file as text.
func ObjectStream(n int) []byte { return ObjectStreamWith(n, "") }

// ObjectStreamWith is ObjectStream with entries added at the end of its object stream's
// dictionary, for a crafted file ("/Note (9 0 obj)", which a reader takes for a string).
func ObjectStreamWith(n int, entries string) []byte {
	w := newWriter()
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(3, fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	w.object(4, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	// The object stream (number 5) holds the page tree (2) and the pages (6 on).
	objs := []string{fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids(6, n), n)}
	nums := []int{2}
	for i := range n {
		objs = append(objs, page())
		nums = append(nums, 6+i)
	}
	var header, body strings.Builder
	for i, o := range objs {
		fmt.Fprintf(&header, "%d %d ", nums[i], body.Len())
		body.WriteString(o + "\n")
	}
	packed := Deflate([]byte(header.String() + body.String()))
	w.stream(5, fmt.Sprintf("<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d%s >>", len(objs), header.Len(), len(packed), entries), packed)
	return w.finishStream(6+n, nums)
}

// CompressedText is a PDF of one page whose content stream, compressed with FlateDecode,
// shows about n bytes of text: a page whose text, which a provider extracts and bills, is far
// more than the file's size.
func CompressedText(n int) []byte { return CompressedTextWith(n, "") }

// CompressedTextWith is CompressedText with entries added to its content stream's dictionary,
// for a crafted file ("/Subtype /Image", which a reader drawing the page disregards).
func CompressedTextWith(n int, entries string) []byte {
	const line = "(The same line of text, shown again and again on one page.) Tj T*\n"
	shown := "BT /F1 1 Tf 1 TL 72 720 Td\n" + strings.Repeat(line, max(1, n/len(line))) + "ET"
	packed := Deflate([]byte(shown))
	w := newWriter()
	w.object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	w.object(2, "<< /Type /Pages /Kids [5 0 R] /Count 1 >>")
	w.stream(3, fmt.Sprintf("<< /Filter /FlateDecode /Length %d%s >>", len(packed), entries), packed)
	w.object(4, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	w.object(5, page())
	return w.finish(6, 1)
}

// kids is the page tree's /Kids of n pages numbered from first on.
func kids(first, n int) string {
	refs := make([]string, n)
	for i := range n {
		refs[i] = fmt.Sprintf("%d 0 R", first+i)
	}
	return strings.Join(refs, " ")
}

// page is one page dictionary, showing the shared content stream.
func page() string {
	return "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << /F1 4 0 R >> >> >>"
}

// Deflate is b compressed with zlib, as a PDF's FlateDecode streams are.
func Deflate(b []byte) []byte {
	var buf bytes.Buffer
	z := zlib.NewWriter(&buf)
	_, _ = z.Write(b)
	_ = z.Close()
	return buf.Bytes()
}

// writer writes a PDF's objects and remembers where each starts.
type writer struct {
	buf     bytes.Buffer
	offsets map[int]int
}

// newWriter starts a PDF with its header.
func newWriter() *writer {
	w := &writer{offsets: map[int]int{}}
	w.buf.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	return w
}

// object writes object num with body.
func (w *writer) object(num int, body string) {
	w.offsets[num] = w.buf.Len()
	fmt.Fprintf(&w.buf, "%d 0 obj\n%s\nendobj\n", num, body)
}

// stream writes object num as a stream with dictionary dict and data.
func (w *writer) stream(num int, dict string, data []byte) {
	w.offsets[num] = w.buf.Len()
	fmt.Fprintf(&w.buf, "%d 0 obj\n%s\nstream\n", num, dict)
	w.buf.Write(data)
	w.buf.WriteString("\nendstream\nendobj\n")
}

// finish writes a classic cross-reference table of objects 1 to size-1 and the trailer.
func (w *writer) finish(size, root int) []byte {
	start := w.buf.Len()
	fmt.Fprintf(&w.buf, "xref\n0 %d\n0000000000 65535 f \n", size)
	for i := 1; i < size; i++ {
		fmt.Fprintf(&w.buf, "%010d 00000 n \n", w.offsets[i])
	}
	fmt.Fprintf(&w.buf, "trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n", size, root, start)
	return w.buf.Bytes()
}

// finishStream writes a cross-reference stream (object size, uncompressed) of objects 0 to
// size, those in packed being in object stream 5 at their index, and the end of the file.
func (w *writer) finishStream(size int, packed []int) []byte {
	in := map[int]int{}
	for i, num := range packed {
		in[num] = i
	}
	start := w.buf.Len()
	var rows bytes.Buffer
	for i := 0; i <= size; i++ {
		switch idx, ok := in[i]; {
		case i == 0:
			rows.Write([]byte{0, 0, 0, 0, 0, 0xff, 0xff})
		case ok:
			rows.Write([]byte{2, 0, 0, 0, 5, byte(idx >> 8), byte(idx)})
		case i == size:
			rows.Write([]byte{1, byte(start >> 24), byte(start >> 16), byte(start >> 8), byte(start), 0, 0})
		default:
			off := w.offsets[i]
			rows.Write([]byte{1, byte(off >> 24), byte(off >> 16), byte(off >> 8), byte(off), 0, 0})
		}
	}
	w.stream(size, fmt.Sprintf("<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Length %d >>", size+1, rows.Len()), rows.Bytes())
	fmt.Fprintf(&w.buf, "startxref\n%d\n%%%%EOF\n", start)
	return w.buf.Bytes()
}
