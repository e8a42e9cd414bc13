package pdfpages_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pdftest"
	"github.com/tollgate/tollgate/impl/pdfpages"
)

// objStm is a file whose one object stream, with dictionary dict, holds data compressed.
func objStm(dict string, data []byte) []byte {
	return []byte(fmt.Sprintf("%%PDF-1.7\n5 0 obj\n%s\nstream\n%s\nendstream\nendobj\n", dict, pdftest.Deflate(data)))
}

// TestCount: the pages of a PDF are counted wherever their page objects are, however the
// names are spelled, and a file whose pages cannot be counted says so.
func TestCount(t *testing.T) {
	pages := strings.Repeat("<< /Type /Page >>\n", 7)
	for _, tc := range []struct {
		name string
		data []byte
		want int
		ok   bool
	}{
		{"plain, 1 page", pdftest.Plain(1), 1, true},
		{"plain, 100 pages", pdftest.Plain(100), 100, true},
		{"object stream, 100 pages, obj in its dictionary", pdftest.ObjectStreamWith(100, " /Note (9 0 obj /Type /Page)"), 101, true},
		{"object stream, 100 pages", pdftest.ObjectStream(100), 100, true},
		{"object stream, 3 pages", pdftest.ObjectStream(3), 3, true},
		{"the page tree's count above the page objects", []byte("%PDF-1.4\n<< /Type /Pages /Count 12 >> << /Type /Page >>"), 12, true},
		{"an outline's count of bookmarks is no page count", []byte("%PDF-1.4\n<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >> << /Type /Page >> << /Type /Page >>" +
			"<< /Type /Outlines /First 5 0 R /Last 6 0 R /Count 1000 >> << /Title (Part one) /Parent 4 0 R /First 7 0 R /Last 8 0 R /Count 500 >>"), 2, true},
		{"untyped pages, a page tree naming /Title", pdftest.UntypedPages(100, "/Title (x) /Note (/Type /Page)"), 100, true},
		{"untyped pages with contents", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 1 >> << /Parent 2 0 R /Contents 6 0 R >> << /Parent 2 0 R /Contents [6 0 R 7 0 R] >> << /Parent 2 0 R /Contents 6 0 R >> << /Type /Annot /Contents (a note) >>"), 3, true},
		{"a page tree's count by an indirect reference", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 9 0 R >> endobj\n3 0 obj << /Parent 2 0 R >> endobj\n9 0 obj 12 endobj\n"), 12, true},
		{"a page tree's count and kids by indirect references, as Oracle Reports writes them", oracleReports(), 4, true},
		{"a page tree's count by a reference to an object not defined", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R] /Count 9 0 R >> endobj\n"), 2, true},
		{"a page tree's count by a reference to an integer in an object stream not held", append(objStm("<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>", []byte("9 0 12")), "1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 9 0 R >> endobj\n<< /Type /Page >>"...), 12, true},
		{"a page tree's count by a reference to a dictionary in an object stream not held", append(objStm("<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>", []byte("9 0 << /N 12 >>")), "1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 9 0 R >> endobj\n<< /Type /Page >>"...), 0, false},
		{"an outline's count by an indirect reference is no page count", []byte("%PDF-1.4\n<< /Type /Page >> << /Type /Outlines /First 5 0 R /Last 6 0 R /Count 9 0 R >> 9 0 obj 1000 endobj"), 1, true},
		{"a page tree's kids by an indirect reference no root leads to", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Kids 9 0 R /Count 1 >> 9 0 obj [3 0 R 4 0 R 5 0 R] endobj << /Parent 2 0 R >> << /Parent 2 0 R >> << /Parent 2 0 R >>"), 0, false},
		{"a page tree's kids in an array object of their own", pdftest.KidsArray(100, false), 100, true},
		{"a page tree's kids in an array object compressed in an object stream", pdftest.KidsArray(100, true), 100, true},
		{"a page tree's kids in an array object defined twice, once by a decoy", kidsArrayFile("9 0 obj [3 0 R 4 0 R 5 0 R] endobj\n% 9 0 obj << /Kids [] >>\n"), 3, true},
		{"a page tree's kids in an array object that lists the node itself", kidsArrayFile("9 0 obj [2 0 R 3 0 R 4 0 R] endobj\n"), 2, true},
		{"a page tree's kids referring to a dictionary", kidsArrayFile("9 0 obj << /Kids [3 0 R 4 0 R 5 0 R] >> endobj\n"), 0, false},
		{"a page tree's kids referring to an array holding something but references", kidsArrayFile("9 0 obj [3 0 R null 4 0 R 5 0 R] endobj\n"), 0, false},
		{"a page tree's kids referring to an object not defined", kidsArrayFile(""), 0, false},
		{"a page tree's kids by an indirect reference in a string", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Note (/Kids 9 0 R) /Kids [3 0 R] /Count 1 >> endobj\n9 0 obj [3 0 R 4 0 R 5 0 R] endobj\n"), 1, true},
		{"blank untyped pages under a root stating one", pdftest.BlankPages(100, 1, true), 100, true},
		{"blank untyped pages in nodes of ten, each stating one", pdftest.BlankPages(95, 1, false), 95, true},
		{"blank untyped pages beside a decoy kids array", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 1 >> endobj\n3 0 obj << /Parent 2 0 R /X << /Kids [] >> /Y (/Kids []) >> endobj\n4 0 obj << /Parent 2 0 R >> endobj\n5 0 obj << /Parent 2 0 R >> endobj\n% 2 0 obj << /Kids [] >>\n"), 3, true},
		{"a page tree node named twice", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 3 0 R] /Count 1 >> endobj\n3 0 obj << /Type /Pages /Kids [4 0 R 5 0 R 6 0 R] /Count 1 >> endobj\n4 0 obj << >> endobj\n5 0 obj << >> endobj\n6 0 obj << >> endobj\n"), 6, true},
		{"a page tree node defined twice", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [4 0 R 5 0 R 6 0 R] /Count 1 >> endobj\n4 0 obj << >> endobj\n5 0 obj << >> endobj\n6 0 obj << >> endobj\n2 0 obj << /Type /Pages /Kids [4 0 R] /Count 1 >> endobj\n"), 3, true},
		{"a page tree whose nodes are in a cycle", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R 4 0 R] /Count 1 >> endobj\n3 0 obj << /Kids [2 0 R 5 0 R] >> endobj\n"), 2, true},
		{"a page tree node whose header a cross-reference entry reads within another's digits", gluedNode("table"), 5, true},
		{"a page tree node whose header a cross-reference stream's entry reads within another's digits", gluedNode("png"), 5, true},
		{"the same, the stream's entries under a TIFF predictor", gluedNode("tiff"), 5, true},
		{"a page tree node past the first MiB of its object stream", pdftest.FarNode(100), 100, true},
		{"a page tree node numbered past a million, its pages too", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [2000000 0 R] /Count 1 >> endobj\n" +
			"2000000 0 obj << /Type /Pages /Kids [2000001 0 R 2000002 0 R 2000003 0 R] /Count 1 >> endobj\n2000001 0 obj << >> endobj\n2000002 0 obj << >> endobj\n2000003 0 obj << >> endobj\n"), 3, true},
		{"a page tree node numbered past what a walk holds", []byte("%PDF-1.4\n<< /Type /Page >>\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3000000000 0 R] /Count 1 >> endobj\n3000000000 0 obj << /Kids [4 0 R 5 0 R] >> endobj\n"), 0, false},
		{"a kids array holding something but references", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R null 4 0 R 5 0 R] /Count 1 >> endobj"), 0, false},
		{"a page tree node that cannot be read", []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Count 1 ) /Kids [3 0 R 4 0 R 5 0 R] >> endobj"), 0, false},
		{"a page tree's count with an outline's name beside its kids", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Kids [3 0 R] /Count 100 /Title (x) >> << /Parent 2 0 R >>"), 100, true},
		{"a page tree's kids before << in a string", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Kids [3 0 R] /X (<<) /Count 100 /Title (x) >>"), 100, true},
		{"a page tree's kids before << in a string with an escape", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Kids [3 0 R] /X ( << \\( ) /Count 100 /Title (x) >>"), 100, true},
		{"a page tree's kids after >> in a string", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Count 100 /Title (>>) /Kids [3 0 R] >>"), 100, true},
		{"a page tree's kids before << in a comment", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Kids [3 0 R] % <<\n/Count 100 /Title (x) >>"), 100, true},
		{"a page tree's kids after >> in a comment", []byte("%PDF-1.4\n% /Type /Page\n<< /Type /Pages /Count 100 /Title (x) % >>\n/Kids [3 0 R] >>"), 100, true},
		{"an outline item whose title has parentheses and a percent sign", []byte("%PDF-1.4\n<< /Type /Page >> << /Title (Growth \\(10%\\) and (more)) /Parent 4 0 R /First 7 0 R /Last 8 0 R /Count 500 >>"), 1, true},
		{"a page tree's count beside a nested dictionary", []byte("%PDF-1.4\n<< /Type /Pages /Resources << /Font << /F1 5 0 R >> >> /Count 12 >> << /Type /Page >>"), 12, true},
		{"a count whose dictionary is not closed", []byte("%PDF-1.4\n<< /Type /Page >> << /First 5 0 R /Count 9"), 9, true},
		{"pages without a page tree count", []byte("%PDF-1.4\n<< /Type /Pages /Count 1 >>" + pages), 7, true},
		{"a #xx escape in a name", []byte("%PDF-1.4\n<< /Type /P#61ge >> << /T#79pe /Page >>"), 2, true},
		{"a comment between the key and the value", []byte("%PDF-1.4\n<< /Type % a comment\n/Page >>"), 1, true},
		{"no space between them", []byte("%PDF-1.4\n<</Type/Page>>"), 1, true},
		{"/Pages is not a page", []byte("%PDF-1.4\n<< /Type /Pages >> << /Type /Page >> << /Type /PageX >>"), 1, true},
		{"the header after leading bytes", append(bytes.Repeat([]byte{' '}, 500), []byte("%PDF-1.4\n<< /Type /Page >>")...), 1, true},
		{"an object stream known by /N and /First", objStm("<< /N 7 /First 0 /Filter /FlateDecode >>", []byte(pages)), 7, true},
		{"an object stream's filter in an array", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter [/FlateDecode] >>", []byte(pages)), 7, true},
		{"an object stream's filter name escaped", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /Flate#44ecode >>", []byte(pages)), 7, true},
		{"an object stream whose dictionary says obj in a string", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode /Note (9 0 obj /Type /Page) >>", []byte(pages)), 8, true},
		{"an object stream whose dictionary says obj in a comment", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode % /Type /Page 9 0 obj <<\n/Length 5 >>", []byte(pages)), 8, true},
		{"an object stream whose dictionary says obj in a name", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode /Noteobj << /Type /Page >> >>", []byte(pages)), 8, true},
		{"an object stream with a predictor not known before obj in a string", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode /DecodeParms << /Predictor 3 >> /Note (9 0 obj /Type /Page) >>", []byte(pages)), 0, false},
		{"an object stream whose dictionary has a string", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode /Note (a note) >>", []byte(pages)), 7, true},
		{"an object stream whose keyword has spaces after it", []byte("%PDF-1.7\n% /Type /Page\n5 0 obj\n<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode >>\nstream  \r\n" + string(pdftest.Deflate([]byte(pages))) + "\nendstream\nendobj\n"), 8, true},
		{"an object stream whose keyword has no end of line after it", []byte("%PDF-1.7\n% /Type /Page\n5 0 obj\n<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode >>\nstream " + string(pdftest.Deflate([]byte(pages))) + "\nendstream\nendobj\n"), 8, true},
		{"an object stream whose /First is a reference", objStm("<< /Type /ObjStm /N 7 /First 9 0 R /Filter /FlateDecode >>", []byte(pages)), 0, false},
		{"an object stream whose /N is given twice", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode /N 1 >>", []byte(pages)), 0, false},
		{"a compressed stream that is no object stream", objStm("<< /Filter /FlateDecode >>", []byte(pages)), 0, false},
		{"no header", []byte("<< /Type /Page >>"), 0, false},
		{"a Word document", []byte("PK\x03\x04word/document.xml"), 0, false},
		{"no page", []byte("%PDF-1.4\n"), 0, false},
		{"encrypted", []byte("%PDF-1.4\n<< /Type /Page >> trailer << /Encrypt 9 0 R >>"), 0, false},
		{"an object stream with another filter", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /LZWDecode >>", []byte(pages)), 0, false},
		{"an object stream with two filters", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter [/ASCIIHexDecode /FlateDecode] >>", []byte(pages)), 0, false},
		{"an object stream with a predictor not known", objStm("<< /Type /ObjStm /N 7 /First 0 /Filter /FlateDecode /DecodeParms << /Predictor 3 >> >>", []byte(pages)), 0, false},
		{"an object stream that does not inflate", []byte("%PDF-1.7\n5 0 obj\n<< /Type /ObjStm /N 1 /First 0 /Filter /FlateDecode >>\nstream\nnot zlib\nendstream\nendobj\n<< /Type /Page >>"), 0, false},
		{"an object stream past the inflate bound", objStm("<< /Type /ObjStm /N 1 /First 0 /Filter /FlateDecode >>", append([]byte("<< /Type /Page >>"), make([]byte, 2<<20)...)), 0, false},
		{"an object stream's dictionary padded past its window", []byte("%PDF-1.7\n5 0 obj\n<< /Type /ObjStm" + strings.Repeat(" ", 5000) + "/N 1 /First 0 /Filter /FlateDecode >>\nstream\n" + string(pdftest.Deflate([]byte(pages))) + "\nendstream"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := pdfpages.Count(tc.data)
			if ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestWalkHoldsOnlyWhatMayBeANode: the page tree's walk keeps the inflated object streams
// whose objects may be page tree nodes (their data says /Kids, or has a # that could spell it),
// at most 8 MiB of them in a file, and drops the others once read, as Read did before it
// walked: nine object streams of 1 MiB each, with a page and padding, are counted; the same
// with a page tree node in each are not established.
func TestWalkHoldsOnlyWhatMayBeANode(t *testing.T) {
	file := func(object string) []byte {
		var b bytes.Buffer
		b.WriteString("%PDF-1.7\n%" + strings.Repeat("x", 200<<10) + "\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n")
		for k := range 9 {
			packed := pdftest.Deflate([]byte("0 0 " + object + strings.Repeat(" ", 1<<20)))
			fmt.Fprintf(&b, "%d 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length %d >>\nstream\n", 10+k, len(packed))
			b.Write(packed)
			b.WriteString("\nendstream\nendobj\n")
		}
		return b.Bytes()
	}
	if n, ok := pdfpages.Count(file("<< /Type /Page >>")); !ok || n != 9 {
		t.Errorf("nine object streams of a page each: Count = %d, %v; want 9", n, ok)
	}
	if n, ok := pdfpages.Count(file("<< /Type /Page /Kids [] >>")); ok {
		t.Errorf("nine object streams of 1 MiB that may hold page tree nodes: Count = %d; want not established", n)
	}
	// An array of references in a stream that is not held is kept (a /Kids value may refer to
	// it), and counts with the held bytes.
	page := []byte("<< /Type /Page >>\n")
	if n, ok := pdfpages.Count(append(file("[3 0 R 4 0 R]"), page...)); !ok || n != 1 {
		t.Errorf("nine object streams of an array of two references each: Count = %d, %v; want 1", n, ok)
	}
	if n, ok := pdfpages.Count(append(file("["+strings.Repeat("3 0 R ", 1<<20/6)+"]"), page...)); ok {
		t.Errorf("nine object streams of an array of 1 MiB each: Count = %d; want not established", n)
	}
}

// TestKeptArraysSearchIsBounded: the arrays of an object stream that is not held are looked
// for their ends within 32 MiB of a file's bytes: an object stream of 4 MiB defining 60,000
// arrays that start with a reference and never end (each would be looked through to the end of
// the stream, some 200 GB in all) makes the count not established at once.
func TestKeptArraysSearchIsBounded(t *testing.T) {
	const n = 60_000
	var header strings.Builder
	for k := range n {
		fmt.Fprintf(&header, "%d %d ", 10+k, 7*k)
	}
	objects := strings.Repeat("[1 0 R ", n) + strings.Repeat(" ", 4<<20-7*n-header.Len()-1)
	file := objStm(fmt.Sprintf("<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode >>", n, header.Len()), []byte(header.String()+objects))
	file = append(file, "1 0 obj << /Pages 2 0 R >> endobj 2 0 obj << /Kids 10 0 R >> endobj << /Type /Page >>"...)
	start := time.Now()
	if d, ok := pdfpages.Read(file); ok {
		t.Errorf("Read = %+v; want not established", d)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Read took %v", took)
	}
}

// oracleReports is a PDF of four pages whose page tree root gives both its /Kids and its /Count
// by indirect references, as old Oracle Reports versions write them (galkahana/PDF-Writer pull
// request 93 quotes one), with a classic cross-reference table: qpdf reads four pages.
func oracleReports() []byte {
	var b bytes.Buffer
	offsets := map[int]int{}
	object := func(num int, body string) {
		offsets[num] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", num, body)
	}
	b.WriteString("%PDF-1.3\n")
	object(1, "<< /Type /Catalog /Pages 3 0 R >>")
	object(2, "4")
	object(3, "<< /Type /Pages /Kids 4 0 R /Count 2 0 R >>")
	object(4, "[ 5 0 R 6 0 R 7 0 R 8 0 R ]")
	for num := 5; num < 9; num++ {
		object(num, "<< /Type /Page /Parent 3 0 R /MediaBox [0 0 612 792] >>")
	}
	xref := b.Len()
	b.WriteString("xref\n0 9\n0000000000 65535 f \n")
	for num := 1; num < 9; num++ {
		fmt.Fprintf(&b, "%010d 00000 n \n", offsets[num])
	}
	fmt.Fprintf(&b, "trailer\n<< /Size 9 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", xref)
	return b.Bytes()
}

// kidsArrayFile is a PDF whose page tree root, object 2, states /Kids 9 0 R and /Count 1, with
// three blank untyped pages (3 to 5) and array, which defines object 9 (or not).
func kidsArrayFile(array string) []byte {
	return []byte("%PDF-1.4\n% /Type /Page\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids 9 0 R /Count 1 >> endobj\n" +
		"3 0 obj << /Parent 2 0 R >> endobj\n4 0 obj << /Parent 2 0 R >> endobj\n5 0 obj << /Parent 2 0 R >> endobj\n" + array)
}

// gluedNode is a PDF whose page tree root, object 2, is written as "12 0 obj" (a 1 before its
// header) and found by its cross-reference entry, which points at the 2: qpdf reads its five
// blank untyped pages. A decoy object 2 that no entry points at holds one. The entries are in
// a cross-reference table (kind "table"), or in a cross-reference stream, as PDF 1.5 writers
// save them, compressed with a PNG predictor ("png": Up, and Sub for the first row and Paeth
// for object 2's, each filter a row may choose) or TIFF predictor 2 on pixels of two bytes
// ("tiff": three a row).
func gluedNode(kind string) []byte {
	var b bytes.Buffer
	offsets := make([]int, 8)
	object := func(num int, body string) {
		offsets[num] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", num, body)
	}
	b.WriteString("%PDF-1.4\n")
	object(1, "<< /Type /Catalog /Pages 2 0 R >>")
	b.WriteString("1")
	object(2, "<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R 6 0 R 7 0 R] /Count 1 >>")
	for num := 3; num < 8; num++ {
		object(num, "<< /Parent 2 0 R /MediaBox [0 0 612 792] >>")
	}
	b.WriteString("2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n")
	xref := b.Len()
	if kind == "table" {
		b.WriteString("xref\n0 8\n0000000000 65535 f \n")
		for num := 1; num < 8; num++ {
			fmt.Fprintf(&b, "%010d 00000 n \n", offsets[num])
		}
		fmt.Fprintf(&b, "trailer\n<< /Size 8 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", xref)
		return b.Bytes()
	}
	// Entries of a type byte, a four-byte offset and a generation byte, for objects 0 to 8 (8
	// being the stream itself).
	offsets = append(offsets, xref)
	var rows []byte
	prev := make([]byte, 6)
	for num, off := range offsets {
		row := []byte{1, byte(off >> 24), byte(off >> 16), byte(off >> 8), byte(off), 0}
		if num == 0 {
			row = []byte{0, 0, 0, 0, 0, 0xff}
		}
		filter := map[int]byte{0: 1, 2: 4}[num]
		if filter == 0 {
			filter = 2
		}
		rows = append(rows, filter)
		for i := range row {
			var left, upLeft byte
			if i > 0 {
				left, upLeft = row[i-1], prev[i-1]
			}
			predicted := map[byte]byte{1: left, 2: prev[i], 4: paethOf(left, prev[i], upLeft)}[filter]
			rows = append(rows, row[i]-predicted)
		}
		prev = row
	}
	params := "/Predictor 12 /Columns 6"
	if kind == "tiff" {
		rows, params = tiffRows(offsets), "/Predictor 2 /Colors 2 /Columns 3 /BitsPerComponent 8"
	}
	packed := pdftest.Deflate(rows)
	fmt.Fprintf(&b, "8 0 obj\n<< /Type /XRef /Size 9 /W [1 4 1] /Root 1 0 R /Filter /FlateDecode /DecodeParms << %s >> /Length %d >>\nstream\n", params, len(packed))
	b.Write(packed)
	fmt.Fprintf(&b, "\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n", xref)
	return b.Bytes()
}

// tiffRows are the cross-reference entries of gluedNode for the objects at offsets (object 0
// free), encoded with TIFF predictor 2 on pixels of two bytes: each byte after a row's first
// two is its difference from the byte two to its left.
func tiffRows(offsets []int) []byte {
	var rows []byte
	for num, off := range offsets {
		row := []byte{1, byte(off >> 24), byte(off >> 16), byte(off >> 8), byte(off), 0}
		if num == 0 {
			row = []byte{0, 0, 0, 0, 0, 0xff}
		}
		for i := len(row) - 1; i >= 2; i-- {
			row[i] -= row[i-2]
		}
		rows = append(rows, row...)
	}
	return rows
}

// paethOf is PNG's Paeth predictor, for the test's encoder.
func paethOf(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := max(p-int(a), int(a)-p), max(p-int(b), int(b)-p), max(p-int(c), int(c)-p)
	if pa <= pb && pa <= pc {
		return a
	}
	if pb <= pc {
		return b
	}
	return c
}

// TestReadInflated: the bytes of a compressed stream other than an object stream (a page's
// content, whose text the provider extracts and bills) are inflated and counted, but not read
// for pages; an image's and a cross-reference stream's are not inflated, however far they
// would inflate.
func TestReadInflated(t *testing.T) {
	text := bytes.Repeat([]byte("BT (A line of text that is billed.) Tj ET "), 1000)
	page := "<< /Type /Page >>\n"
	dense, _ := pdfpages.Read(pdftest.CompressedText(60_000))
	for _, tc := range []struct {
		name string
		data []byte
		want pdfpages.Document
		ok   bool
	}{
		{"a content stream", append(objStm("<< /Filter /FlateDecode >>", append(text, "/Type /Page"...)), page...), pdfpages.Document{Pages: 1, Inflated: len(text) + len("/Type /Page")}, true},
		{"an image", append(objStm("<< /Type /XObject /Subtype /Image /Filter /FlateDecode >>", make([]byte, 2<<20)), page...), pdfpages.Document{Pages: 1}, true},
		{"a cross-reference stream", append(objStm("<< /Type /XRef /Filter /FlateDecode /DecodeParms << /Predictor 12 >> >>", make([]byte, 2<<20)), page...), pdfpages.Document{Pages: 1}, true},
		{"an object stream", pdftest.ObjectStream(3), pdfpages.Document{Pages: 3, Inflated: -1}, true},
		{"a page's contents that say they are an image", pdftest.CompressedTextWith(60_000, " /Subtype /Image /Width 1 /Height 1 /BitsPerComponent 8 /ColorSpace /DeviceGray"), pdfpages.Document{Pages: 1, Inflated: dense.Inflated}, true},
		{"a page's contents that say they are a cross-reference stream", append(objStm("<< /Type /XRef /Filter /FlateDecode >>", text), "<< /Type /Page /Contents 5 0 R >>\n"...), pdfpages.Document{Pages: 1, Inflated: len(text)}, true},
		{"a page's contents in an array, one an image", append(objStm("<< /Subtype /Image /Filter /FlateDecode >>", text), "<< /Type /Page /Contents [4 0 R % a comment\n 5 0 R] /Annots [<< /Contents (5 0 R) >>] >>\n"...), pdfpages.Document{Pages: 1, Inflated: len(text)}, true},
		{"a page's contents in an array of their own", append(objStm("<< /Subtype /Image /Filter /FlateDecode >>", text), "<< /Type /Page /Contents 7 0 R >>\n7 0 obj\n[5 0 R]\nendobj\n"...), pdfpages.Document{Pages: 1, Inflated: len(text)}, true},
		{"an image another object's contents do not name", append(objStm("<< /Subtype /Image /Filter /FlateDecode >>", text), "4 0 obj\n<< /Length 3 >>\nstream\nq Q\nendstream\nendobj\n<< /Type /Page /Contents 4 0 R >> << /Contents (5 0 R) >>\n"...), pdfpages.Document{Pages: 1}, true},
		{"a content stream past the inflate bound", append(objStm("<< /Filter /FlateDecode >>", make([]byte, 2<<20)), page...), pdfpages.Document{}, false},
		{"a content stream with another filter", append(objStm("<< /Filter /LZWDecode >>", text), page...), pdfpages.Document{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := pdfpages.Read(tc.data)
			if tc.want.Inflated < 0 && d.Inflated > 0 {
				tc.want.Inflated = d.Inflated
			}
			if ok != tc.ok || d != tc.want {
				t.Errorf("Read = %+v, %v; want %+v, %v", d, ok, tc.want, tc.ok)
			}
		})
	}
}

// FuzzCount: no input makes Read panic, report a negative count or one above MaxCount, more
// inflated bytes than its ceiling, or
// report a count below the page objects written in the file as they are. Its seed corpus
// runs as a normal test.
func FuzzCount(f *testing.F) {
	for _, seed := range [][]byte{
		pdftest.Plain(3), pdftest.ObjectStream(5), pdftest.CompressedText(5000), []byte("%PDF-"), []byte("%PDF-/Type/Page"),
		[]byte("%PDF-\n/Type%\n/Page obj stream\n"), []byte("%PDF- obj << /N 1 /Filter /FlateDecode >>\nstream\n"),
		objStm("<< /Type /ObjStm /Filter [/FlateDecode >>", []byte("/Type /Page")),
		[]byte("%PDF-" + strings.Repeat("/Type%", 100)), []byte("%PDF- /Count -5 /Count 99999999999999999999"),
		pdftest.BlankPages(25, 1, true), pdftest.KidsArray(5, true), gluedNode("tiff"), []byte("%PDF- 1 0 obj << /Pages 2 0 R >> 2 0 obj << /Kids [3 0 R 3 0 R] >> 3 0 obj << /Kids [2 0 R 4 0 R] >> /Type /Page"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, ok := pdfpages.Read(data)
		n := d.Pages
		if n < 0 || n > pdfpages.MaxCount || d.Inflated < 0 || d.Inflated > 32<<20 || (!ok && d != pdfpages.Document{}) {
			t.Fatalf("Read = %+v, %v", d, ok)
		}
		if plain := bytes.Count(data, []byte("/Type /Page ")); ok && n < min(plain, pdfpages.MaxCount) {
			t.Fatalf("Count = %d below the %d page objects in the file", n, plain)
		}
	})
}

// TestReadHoldsOnlyObjectStreams: a content stream's inflated bytes are counted, not held, so
// that a small compressed PDF (a request's document) cannot make the process hold tens of
// megabytes while its pages are counted; an object stream, whose objects are read, is held,
// and one that inflates past 4 MiB makes the count uncertain.
func TestReadHoldsOnlyObjectStreams(t *testing.T) {
	// A file of some 600 KB (so that its inflate budget is the 32 MiB ceiling) whose content
	// stream inflates to 20 MiB from some 20 KB.
	padded := func(file []byte) []byte { // a comment of 600 KB after the header's line
		header := bytes.IndexByte(file, '\n') + 1
		return append(append(append([]byte(nil), file[:header]...), "%"+strings.Repeat("x", 600<<10)+"\n"...), file[header:]...)
	}
	content := padded(objStm("<< /Filter /FlateDecode >>", make([]byte, 20<<20)))
	content = append(content, "<< /Type /Page >>\n"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, ok := pdfpages.Read(content)
	runtime.ReadMemStats(&after)
	if !ok || d.Pages != 1 || d.Inflated != 20<<20 {
		t.Fatalf("Read = %+v, %v; want one page and 20 MiB inflated", d, ok)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 2<<20 {
		t.Errorf("reading a content stream of 20 MiB allocated %d bytes", allocated)
	}
	objects := padded(objStm("<< /Type /ObjStm /N 1 /First 0 /Filter /FlateDecode >>", append(make([]byte, 5<<20), "/Type /Page"...)))
	if d, ok := pdfpages.Read(objects); ok {
		t.Errorf("an object stream of 5 MiB read as %+v; want the count uncertain", d)
	}
}
