package pdfpages_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pdftest"
	"github.com/tollgate/tollgate/impl/pdfpages"
)

// pagedFile is a PDF of pages blank untyped pages (objects 10 on) under a root (object 2) that
// states /Count 1, laid out as writers save files: "table" (a cross-reference table),
// "stream" (the pages in an object stream, a cross-reference stream), "update" (an incremental
// update adding the last page and a new root), "hybrid" (a table whose /XRefStm names the
// stream placing the pages in an object stream), "linearized" (a linearization dictionary and
// a first page's section before the rest), "predicted" (the pages in an object stream and the
// entries both under PNG predictors). comment is written as a comment after the header, its
// ends of line dropped, as the string of a document information dictionary (object 9, in
// each layout's first section), and as it is as the body of objects no cross-reference
// names (8 after the header, 7 before the last section; readers do not read them). A reader
// finds pages pages in each.
func pagedFile(layout string, pages int, comment string) []byte {
	f := newPDF()
	f.raw("%" + strings.NewReplacer("\r", " ", "\n", " ").Replace(comment) + "\n")
	f.obj(9, "<< /Producer ("+strings.NewReplacer("\\", "\\\\", "(", "\\(", ")", "\\)").Replace(comment)+") >>")
	unreferenced := func(num int) { f.raw(fmt.Sprintf("%d 0 obj\n%s\nendobj\n", num, comment)) }
	unreferenced(8)
	size := 10 + pages + 2
	catalog := "<< /Type /Catalog /Pages 2 0 R >>"
	root := fmt.Sprintf("<< /Type /Pages /Kids %s /Count 1 /MediaBox [0 0 612 792] >>", kidRefs(10, pages))
	page := "<< /Parent 2 0 R >>"
	bodies := make([]string, pages)
	for k := range bodies {
		bodies[k] = page
	}
	switch layout {
	case "table":
		f.obj(1, catalog)
		f.obj(2, root)
		for k := range pages {
			f.obj(10+k, page)
		}
		unreferenced(7)
		f.table(size, "/Root 1 0 R")
	case "stream", "predicted":
		f.obj(1, catalog)
		f.obj(2, root)
		var params string
		var encode, entries func([]byte) []byte
		if layout == "predicted" {
			params = "/DecodeParms << /Predictor 12 /Columns 5 >>"
			encode = func(b []byte) []byte { return pngEncode(b, 5, 1, 2) }
			entries = func(b []byte) []byte { return pngEncode(b, 7, 1, 4) }
		}
		f.objStm(5, params, encode, 10, bodies...)
		unreferenced(7)
		if entries == nil {
			f.xrefStream(size-1, size, "/Root 1 0 R", nil, false)
		} else {
			f.xrefStream(size-1, size, "/Root 1 0 R /DecodeParms << /Predictor 12 /Columns 7 >>", entries, false)
		}
	case "update":
		f.obj(1, catalog)
		f.obj(2, fmt.Sprintf("<< /Type /Pages /Kids %s /Count 1 /MediaBox [0 0 612 792] >>", kidRefs(10, pages-1)))
		for k := range pages - 1 {
			f.obj(10+k, page)
		}
		f.table(size, "/Root 1 0 R")
		f.obj(2, root)
		f.obj(10+pages-1, page)
		unreferenced(7)
		f.table(size, "/Root 1 0 R")
	case "hybrid":
		f.obj(1, catalog)
		f.obj(2, root)
		f.objStm(5, "", nil, 10, bodies...)
		unreferenced(7)
		at := f.xrefStream(size-1, size, "", nil, true)
		f.table(size, fmt.Sprintf("/Root 1 0 R /XRefStm %d", at))
	case "linearized":
		f.obj(3, fmt.Sprintf("<< /Linearized 1 /L %d /H [0 0] /O 10 /E 0 /N %d /T 0 >>", 0, pages))
		f.table(size, "/Root 1 0 R")
		f.obj(1, catalog)
		f.obj(2, root)
		for k := range pages {
			f.obj(10+k, page)
		}
		unreferenced(7)
		f.table(size, "/Root 1 0 R")
	default:
		panic(layout)
	}
	return f.bytes()
}

// layouts are pagedFile's layouts.
var layouts = []string{"table", "stream", "update", "hybrid", "linearized", "predicted"}

// TestCountPagedFiles: files as writers save them (cross-reference tables and streams,
// incremental updates, hybrid and linearized files, object streams and cross-reference streams
// under predictors) are counted to the pages a reader finds in them, which qpdf confirms when
// it is installed.
func TestCountPagedFiles(t *testing.T) {
	for _, layout := range layouts {
		t.Run(layout, func(t *testing.T) {
			data := pagedFile(layout, 7, "a comment")
			if n, ok := qpdfPages(t, data); ok && n != 7 {
				t.Fatalf("qpdf reads %d pages; want 7", n)
			}
			if n, ok := pdfpages.Count(data); !ok || n != 7 {
				t.Errorf("Count = %d, %v; want 7", n, ok)
			}
		})
	}
}

// TestCountReadsOnlyThePageTree: a /Kids that refers to an array object outside the page tree
// (an interactive form field's, a name tree node's), which the walk from the catalog's /Pages
// does not reach, leaves the count established at the pages a reader finds; one in a file that
// states no root by a reference still makes it not established (a reader repairing the file
// may take any node for its root).
func TestCountReadsOnlyThePageTree(t *testing.T) {
	formAndNames := func(catalog string) []byte {
		f := newPDF()
		f.obj(1, catalog)
		f.obj(2, "<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 3 /MediaBox [0 0 612 792] >>")
		for num := 3; num <= 5; num++ {
			f.obj(num, "<< /Type /Page /Parent 2 0 R /Annots [23 0 R] >>")
		}
		f.obj(20, "<< /Fields [21 0 R] >>")
		f.obj(21, "<< /FT /Tx /T (name) /Kids 22 0 R >>")
		f.obj(22, "[23 0 R 24 0 R]")
		f.obj(23, "<< /Type /Annot /Subtype /Widget /Parent 21 0 R /Rect [0 0 10 10] /P 3 0 R >>")
		f.obj(24, "<< /Type /Annot /Subtype /Widget /Parent 21 0 R /Rect [0 0 10 10] >>")
		f.obj(30, "<< /Kids 31 0 R >>")
		f.obj(31, "[32 0 R]")
		f.obj(32, "<< /Names [(a) [3 0 R /Fit]] /Limits [(a) (a)] >>")
		f.table(33, "/Root 1 0 R")
		return f.bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want int
		ok   bool
	}{
		{"a form field's and a name tree's kids in array objects", formAndNames("<< /Type /Catalog /Pages 2 0 R /AcroForm 20 0 R /Names << /Dests 30 0 R >> >>"), 3, true},
		{"the same, the catalog's pages a dictionary of its own", formAndNames("<< /Type /Catalog /Pages << /Type /Pages /Kids 22 0 R /Count 1 >> /AcroForm 20 0 R >>"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, ok := qpdfPages(t, tc.data); ok && tc.ok && n != tc.want {
				t.Fatalf("qpdf reads %d pages; want %d", n, tc.want)
			}
			if n, ok := pdfpages.Count(tc.data); ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// predictedFile is a PDF of ten blank untyped pages (objects 11 to 20) under a node (object
// 10) that its root (object 2, stating /Count 1) names, the node and the pages in an object
// stream whose data is encoded by encode under the decode parameters params (object 40, when
// it is a dictionary, is defined as params40).
func predictedFile(params string, encode func([]byte) []byte, params40 string) []byte {
	f := newPDF()
	f.obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	f.obj(2, "<< /Type /Pages /Kids [10 0 R] /Count 1 /MediaBox [0 0 612 792] >>")
	bodies := []string{"<< /Type /Pages /Parent 2 0 R /Kids " + kidRefs(11, 10) + " /Count 10 >>"}
	for range 10 {
		bodies = append(bodies, "<< /Parent 10 0 R >>")
	}
	f.objStm(5, params, encode, 10, bodies...)
	if params40 != "" {
		f.obj(40, params40)
	}
	f.xrefStream(41, 42, "/Root 1 0 R", nil, false)
	return f.bytes()
}

// TestCountUndoesObjectStreamPredictors: an object stream whose data is under a PNG or TIFF
// predictor (of components of 1 to 16 bits, its decode parameters direct or in an object of
// their own) is read once the predictor is undone, and the pages under its node are counted;
// a predictor that cannot be undone makes the count not established.
func TestCountUndoesObjectStreamPredictors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   string
		encode   func([]byte) []byte
		params40 string
		want     int
		ok       bool
	}{
		{"PNG Up", "/DecodeParms << /Predictor 12 /Columns 5 >>", func(b []byte) []byte { return pngEncode(b, 5, 1, 2) }, "", 10, true},
		{"PNG Paeth on pixels of three bytes", "/DecodeParms << /Predictor 15 /Colors 3 /BitsPerComponent 8 /Columns 4 >>", func(b []byte) []byte { return pngEncode(b, 12, 3, 4) }, "", 10, true},
		{"PNG Sub on pixels of two 16-bit components", "/DecodeParms [<< /Predictor 11 /Colors 2 /BitsPerComponent 16 /Columns 3 >>]", func(b []byte) []byte { return pngEncode(b, 12, 4, 1) }, "", 10, true},
		{"TIFF on 8-bit components", "/DecodeParms << /Predictor 2 /Colors 3 /Columns 5 >>", func(b []byte) []byte { return tiffEncode(b, 3, 8, 5) }, "", 10, true},
		{"TIFF on 16-bit components", "/DecodeParms << /Predictor 2 /Colors 1 /BitsPerComponent 16 /Columns 4 >>", func(b []byte) []byte { return tiffEncode(b, 1, 16, 4) }, "", 10, true},
		{"TIFF on 4-bit components", "/DecodeParms << /Predictor 2 /Colors 2 /BitsPerComponent 4 /Columns 3 >>", func(b []byte) []byte { return tiffEncode(b, 2, 4, 3) }, "", 10, true},
		{"TIFF on 1-bit components", "/DecodeParms << /Predictor 2 /Colors 1 /BitsPerComponent 1 /Columns 24 >>", func(b []byte) []byte { return tiffEncode(b, 1, 1, 24) }, "", 10, true},
		{"PNG Average, its parameters in an object of their own", "/DecodeParms 40 0 R", func(b []byte) []byte { return pngEncode(b, 7, 1, 3) }, "<< /Predictor 13 /Columns 7 >>", 10, true},
		{"parameters in an object not defined", "/DecodeParms 40 0 R", func(b []byte) []byte { return pngEncode(b, 7, 1, 3) }, "", 0, false},
		{"parameters in an object that is no dictionary", "/DecodeParms 40 0 R", func(b []byte) []byte { return pngEncode(b, 7, 1, 3) }, "12", 0, false},
		{"a predictor that is not known", "/DecodeParms << /Predictor 3 /Columns 5 >>", func(b []byte) []byte { return pngEncode(b, 5, 1, 2) }, "", 0, false},
		{"components of 3 bits", "/DecodeParms << /Predictor 2 /BitsPerComponent 3 /Columns 8 >>", func(b []byte) []byte { return b }, "", 0, false},
		{"columns by a reference", "/DecodeParms << /Predictor 12 /Columns 9 0 R >>", func(b []byte) []byte { return pngEncode(b, 5, 1, 2) }, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := predictedFile(tc.params, tc.encode, tc.params40)
			if n, ok := qpdfPages(t, data); ok && tc.ok && n != tc.want {
				t.Fatalf("qpdf reads %d pages; want %d", n, tc.want)
			}
			if n, ok := pdfpages.Count(data); ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// laterParamsFile is a PDF of ten blank untyped pages under a node (object 10) that its root
// (object 2, stating /Count 1) names, the node and the pages in an object stream (object 5)
// under a PNG predictor whose decode parameters, object 40, are in an object stream further on
// (object 6), itself under the decode parameters params6 (direct, or object 50 in object
// stream 7 after it, or none), with decoy written before object 5. Readers resolve object 40
// by the cross-reference stream, wherever it is.
func laterParamsFile(decoy, params6 string) []byte {
	f := newPDF()
	f.obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	f.obj(2, "<< /Type /Pages /Kids [10 0 R] /Count 1 /MediaBox [0 0 612 792] >>")
	f.raw(decoy)
	bodies := []string{"<< /Type /Pages /Parent 2 0 R /Kids " + kidRefs(11, 10) + " /Count 10 >>"}
	for range 10 {
		bodies = append(bodies, "<< /Parent 10 0 R >>")
	}
	f.objStm(5, "/DecodeParms 40 0 R", func(b []byte) []byte { return pngEncode(b, 7, 1, 3) }, 10, bodies...)
	var encode6 func([]byte) []byte
	if params6 != "" {
		encode6 = func(b []byte) []byte { return pngEncode(b, 4, 1, 2) }
	}
	f.objStm(6, params6, encode6, 40, "<< /Predictor 13 /Columns 7 >>")
	f.objStm(7, "", nil, 50, "<< /Predictor 12 /Columns 4 >>")
	f.xrefStream(51, 52, "/Root 1 0 R", nil, false)
	return f.bytes()
}

// TestCountResolvesParametersDefinedLater: an object stream whose decode parameters are given
// by a reference to an object in an object stream further on (even one under parameters of its
// own further on still) is read once every other stream has been, as qpdf reads it (ten
// pages); before, the parameters were looked for among the objects read so far, so the file
// was not established, and with a decoy object 40 earlier in the file, which no
// cross-reference names, the stream was read under the decoy's predictor and its pages missed
// (counted 1). Parameters that resolve otherwise once every stream is read (the decoy beside
// the real object), or streams that wait on each other's parameters, make the count not
// established; an image's parameters, which the count does not read, do not.
func TestCountResolvesParametersDefinedLater(t *testing.T) {
	const decoy = "40 0 obj\n<< /Predictor 12 /Columns 5 >>\nendobj\n"
	for _, tc := range []struct {
		name string
		data []byte
		want int
		ok   bool
	}{
		{"in an object stream further on", laterParamsFile("", ""), 10, true},
		{"in one under parameters further on still", laterParamsFile("", "/DecodeParms 50 0 R"), 10, true},
		{"in one under direct parameters", laterParamsFile("", "/DecodeParms << /Predictor 12 /Columns 4 >>"), 10, true},
		{"an image's parameters by a reference to no object", laterParamsFile("60 0 obj\n<< /Subtype /Image /Width 8 /Height 1 /BitsPerComponent 1 /Filter /CCITTFaxDecode /DecodeParms 99 0 R /Length 1 >>\nstream\nx\nendstream\nendobj\n", ""), 10, true},
		{"a decoy before them", laterParamsFile(decoy, ""), 0, false},
		{"in one whose parameters are in the first", laterParamsFile("", "/DecodeParms 11 0 R"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, ok := qpdfPages(t, tc.data); ok && !strings.Contains(tc.name, "first") && n != 10 {
				t.Fatalf("qpdf reads %d pages; want 10", n)
			}
			if n, ok := pdfpages.Count(tc.data); ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// gluedFile is a PDF whose page tree root, object 2, is written as "12 0 obj" (a 1 before its
// header) and found by its cross-reference stream's entry alone, with five blank untyped pages
// and a decoy object 2 that no entry points at holding one: the stream's entries are encoded
// by encode under the decode parameters params (object 9, when it is a dictionary, is defined as
// params9). Only a reader of the entries finds five pages.
func gluedFile(params string, encode func([]byte) []byte, params9 string) []byte {
	return gluedFileAfter("", params, encode, params9)
}

// gluedFileAfter is gluedFile with prefix written after its header.
func gluedFileAfter(prefix, params string, encode func([]byte) []byte, params9 string) []byte {
	f := newPDF()
	f.raw(prefix)
	f.obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	f.raw("1")
	f.obj(2, "<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R 6 0 R 7 0 R] /Count 1 /MediaBox [0 0 612 792] >>")
	for num := 3; num < 8; num++ {
		f.obj(num, "<< /Parent 2 0 R >>")
	}
	if params9 != "" {
		f.obj(9, params9)
	}
	f.raw("2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n")
	f.xrefStream(10, 11, "/Root 1 0 R "+params, encode, false)
	return f.bytes()
}

// TestCountReadsXrefStreamPredictors: a cross-reference stream under a PNG or TIFF predictor
// on components of other than eight bits, rows other than its entries, or decode parameters in
// an object of their own, places its objects where readers find them.
func TestCountReadsXrefStreamPredictors(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		encode       func([]byte) []byte
		params9      string
	}{
		{"PNG on 16-bit components", "/DecodeParms << /Predictor 12 /BitsPerComponent 16 /Colors 1 /Columns 7 >>", func(b []byte) []byte { return pngEncode(b, 14, 2, 4) }, ""},
		{"PNG on rows of four bytes", "/DecodeParms << /Predictor 12 /Columns 4 >>", func(b []byte) []byte { return pngEncode(b, 4, 1, 2) }, ""},
		{"TIFF on 16-bit components", "/DecodeParms << /Predictor 2 /BitsPerComponent 16 /Colors 1 /Columns 7 >>", func(b []byte) []byte { return tiffEncode(b, 1, 16, 7) }, ""},
		{"TIFF on 4-bit components", "/DecodeParms << /Predictor 2 /BitsPerComponent 4 /Colors 2 /Columns 7 >>", func(b []byte) []byte { return tiffEncode(b, 2, 4, 7) }, ""},
		{"TIFF on 1-bit components", "/DecodeParms << /Predictor 2 /BitsPerComponent 1 /Colors 1 /Columns 56 >>", func(b []byte) []byte { return tiffEncode(b, 1, 1, 56) }, ""},
		{"PNG, the parameters in an object of their own", "/DecodeParms 9 0 R", func(b []byte) []byte { return pngEncode(b, 7, 1, 4) }, "<< /Predictor 12 /Columns 7 >>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := gluedFile(tc.params, tc.encode, tc.params9)
			// qpdf does not resolve a cross-reference stream's parameters given by a reference
			// (it reads the entries as if there were none, and refuses the file): resolved,
			// they can only add definitions, which make the count err upwards.
			if tc.params9 == "" {
				if n, ok := qpdfPages(t, data); ok && n != 5 {
					t.Fatalf("qpdf reads %d pages; want 5", n)
				}
			}
			if n, ok := pdfpages.Count(data); !ok || n != 5 {
				t.Errorf("Count = %d, %v; want 5", n, ok)
			}
		})
	}
}

// TestCountRefusesXrefStreamsItCannotRead: a cross-reference stream whose entries a reader
// reads but the count cannot (another filter, a predictor not known) makes the count not
// established, as its entries may place a page tree node where no header shows it; one that
// no reader reads (its data does not inflate) leaves the objects to their headers, as readers
// do when they rebuild the file's cross-reference.
func TestCountRefusesXrefStreamsItCannotRead(t *testing.T) {
	hex := func(b []byte) []byte { return []byte(fmt.Sprintf("%X>", b)) }
	for _, tc := range []struct {
		name string
		data []byte
		want int
		ok   bool
	}{
		{"entries under ASCIIHexDecode", gluedFile("/Filter /ASCIIHexDecode", hex, ""), 0, false},
		{"entries under a predictor not known", gluedFile("/DecodeParms << /Predictor 5 /Columns 7 >>", func(b []byte) []byte { return b }, ""), 0, false},
		{"entries that do not inflate", bytes.Replace(gluedFile("", nil, ""), []byte("/W [1 4 2]"), []byte("/W [1 4 2] /Filter /FlateDecode"), 1), 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// qpdf reads the first file's five pages, and refuses the others.
			if strings.Contains(tc.name, "ASCIIHex") {
				if n, ok := qpdfPages(t, tc.data); ok && n != 5 {
					t.Fatalf("qpdf reads %d pages; want 5", n)
				}
			}
			if n, ok := pdfpages.Count(tc.data); ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestCountReadsXrefStreamWidthsAsReadersDo: a cross-reference stream's /W is read as qpdf
// and pdf.js read it: the first three elements of a longer array (qpdf reads gluedFile's five
// pages with /W [1 4 2 0]), a width written as a real of no fraction (pdf.js's
// Number.isInteger takes 4.0) or with a sign (+4, which qpdf reads too), and fields wider than
// eight bytes, of which pdf.js reads the low 32 bits (qpdf refuses them and rebuilds the
// cross-reference from the headers, which the count reads too); and a stream whose dictionary
// says no /Type /XRef, which pdf.js reads as one when a startxref names it (qpdf does not, and
// rebuilds the cross-reference). An /Index is read as pdf.js reads it too (0.0 a count of
// nothing, the subsections after it read). A /W, or one of its widths, given by a reference,
// which a reader may resolve, makes the count not established. Before, each such stream was
// passed over (or its /Index cut at 0.0), and the first six files were counted one page.
func TestCountReadsXrefStreamWidthsAsReadersDo(t *testing.T) {
	widen := func(rows []byte) []byte {
		var out []byte
		for k := 0; k+7 <= len(rows); k += 7 {
			out = append(append(append(out, rows[k], 0xff, 0xff, 0xff, 0xff, 0xff), rows[k+1:k+5]...), rows[k+5:k+7]...)
		}
		return out
	}
	withW := func(data []byte, w string) []byte {
		return bytes.Replace(data, []byte("/W [1 4 2]"), []byte(w), 1)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want int
		ok   bool
	}{
		{"a /W of four elements", withW(gluedFile("", nil, ""), "/W [1 4 2 0]"), 5, true},
		{"a width written 4.0", withW(gluedFile("", nil, ""), "/W [1 4.0 2]"), 5, true},
		{"a width written +4", withW(gluedFile("", nil, ""), "/W [1 +4 2]"), 5, true},
		{"an offset field of nine bytes", withW(gluedFile("", widen, ""), "/W [1 9 2]"), 5, true},
		{"an /Index written 0.0", bytes.Replace(gluedFile("", nil, ""), []byte("/Index [1 7"), []byte("/Index [0 0.0 1 7"), 1), 5, true},
		{"no /Type /XRef", bytes.Replace(gluedFile("", nil, ""), []byte("/Type /XRef "), nil, 1), 5, true},
		{"a /W by a reference", withW(gluedFile("", nil, "[1 4 2]"), "/W 9 0 R"), 0, false},
		{"a width by a reference", withW(gluedFile("", nil, "4"), "/W [1 9 0 R 2]"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.name, "four") || strings.Contains(tc.name, "+4") {
				if n, ok := qpdfPages(t, tc.data); ok && n != 5 {
					t.Fatalf("qpdf reads %d pages; want 5", n)
				}
			}
			if n, ok := pdfpages.Count(tc.data); ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestCountRefusesPastTheXrefEntriesBound: the entries of cross-reference streams are read up
// to 1,048,576 in a file; past it the count is not established, as the entries not read may
// place a page tree node where no header shows it. Before, they were passed over: gluedFile's
// five pages after streams no cross-reference names, stating 1,050,000 entries of a byte (a
// file of some 30 KB), were counted one page where qpdf reads five.
func TestCountRefusesPastTheXrefEntriesBound(t *testing.T) {
	var prefix strings.Builder
	prefix.WriteString("%" + strings.Repeat("x", 20<<10) + "\n")
	for k := range 105 {
		packed := pdftest.Deflate(make([]byte, 10_000))
		fmt.Fprintf(&prefix, "%d 0 obj\n<< /Type /XRef /W [0 1 0] /Index [0 10000] /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream\nendobj\n", 100+k, len(packed), packed)
	}
	data := gluedFileAfter(prefix.String(), "/DecodeParms << /Predictor 12 /Columns 7 >>", func(b []byte) []byte { return pngEncode(b, 7, 1, 2) }, "")
	if n, ok := qpdfPages(t, data); ok && n != 5 {
		t.Fatalf("qpdf reads %d pages; want 5", n)
	}
	if n, ok := pdfpages.Count(data); ok {
		t.Errorf("Count = %d; want not established", n)
	}
}

// TestCountReadsANumberInAnObjectStream: a page tree's /Count that refers to an integer
// object packed in an object stream that holds no page tree node (so that it is not held) is
// read, as pdf.js reads a document's number of pages from its root's /Count; so is one that
// refers to a reference to it there, as MuPDF reads it.
func TestCountReadsANumberInAnObjectStream(t *testing.T) {
	f := newPDF()
	f.obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	f.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 9 0 R /MediaBox [0 0 612 792] >>")
	f.obj(3, "<< /Type /Page /Parent 2 0 R >>")
	f.objStm(5, "", nil, 8, "<< /Producer (x) >>", "12", "9 0 R")
	f.xrefStream(11, 12, "/Root 1 0 R /Info 8 0 R", nil, false)
	if n, ok := pdfpages.Count(f.bytes()); !ok || n != 12 {
		t.Errorf("Count = %d, %v; want 12", n, ok)
	}
	data := bytes.Replace(f.bytes(), []byte("/Count 9 0 R"), []byte("/Count 10 0 R"), 1)
	if n, ok := pdfpages.Count(data); !ok || n != 12 {
		t.Errorf("a count by a reference to a reference: Count = %d, %v; want 12", n, ok)
	}
}

// TestCountFollowsACountsChainOfReferences: a page tree's /Count that refers to an object
// that is itself a reference is read through the chain, as MuPDF (and so PyMuPDF's
// page_count) reads the root's /Count, following up to ten references: a file of one page
// whose root's /Count leads to 500 through two references is counted 500 (it was counted 9,
// the object number of the reference read as a number; qpdf, pdf.js and PDFium follow no
// such chain and walk the tree, one page). A chain that is a cycle, or longer than 32
// references, makes the count not established.
func TestCountFollowsACountsChainOfReferences(t *testing.T) {
	file := func(objects string) []byte {
		return []byte("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" +
			"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 10 0 R >> endobj\n3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n" + objects)
	}
	var long strings.Builder
	for num := 10; num < 50; num++ {
		fmt.Fprintf(&long, "%d 0 obj %d 0 R endobj\n", num, num+1)
	}
	long.WriteString("50 0 obj 500 endobj\n")
	for _, tc := range []struct {
		name string
		data []byte
		want int
		ok   bool
	}{
		{"two references to a number", file("10 0 obj 9 0 R endobj\n9 0 obj 8 0 R endobj\n8 0 obj 500 endobj\n"), 500, true},
		{"a reference to an object defined twice", file("10 0 obj 9 0 R endobj\n9 0 obj 7 endobj\n9 0 obj 500 endobj\n"), 500, true},
		{"a reference to an object not defined", file("10 0 obj 9 0 R endobj\n"), 1, true},
		{"a cycle", file("10 0 obj 9 0 R endobj\n9 0 obj 10 0 R endobj\n"), 0, false},
		{"a chain of 40 references", file(long.String()), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, ok := pdfpages.Count(tc.data); ok != tc.ok || (ok && n != tc.want) {
				t.Errorf("Count = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// skippedFile is a linearized PDF, its linearization dictionary lin (object 3, first in the
// file after prefix; none when it is empty), whose page tree's root (object 2, stating no
// /Count) holds a node (object 10) stating /Count 100 over one page (object 20), then five
// pages (11 to 15). A /L 0000000000 in lin is written as the file's length. pdf.js takes a
// linearization dictionary's /N for the number of pages and keeps it when a page is found at
// index /N-1: its getPageDict skips node 10 by its /Count to index 100, and pages 11 to 15
// are 100 to 104, so that with /N 105 it shows 105 pages. qpdf walks the tree (six pages).
func skippedFile(prefix, lin string) []byte {
	f := newPDF()
	f.raw(prefix)
	if lin != "" {
		f.obj(3, lin)
	}
	f.obj(1, "<< /Type /Catalog /Pages 2 0 R >>")
	f.obj(2, "<< /Type /Pages /Kids [10 0 R 11 0 R 12 0 R 13 0 R 14 0 R 15 0 R] /MediaBox [0 0 612 792] >>")
	f.obj(10, "<< /Type /Pages /Parent 2 0 R /Kids [20 0 R] /Count 100 >>")
	f.obj(20, "<< /Type /Page /Parent 10 0 R >>")
	for num := 11; num <= 15; num++ {
		f.obj(num, "<< /Type /Page /Parent 2 0 R >>")
	}
	f.table(21, "/Root 1 0 R")
	data := f.bytes()
	return bytes.Replace(data, []byte("/L 0000000000"), []byte(fmt.Sprintf("/L %010d", len(data))), 1)
}

// TestCountTakesTheLinearizedPages: a linearized file's /N is a lower bound of its pages, as
// pdf.js (and PDFium loading it progressively) show a linearized file's /N pages: skippedFile
// with /N 105 is counted 105 (it was counted 100, node 10's /Count), and qpdf takes it for a
// linearized file (--check). A /Linearized dictionary that is not the file's first
// object, or whose /N is a reference, is no linearization dictionary to readers, and its /N is
// not taken.
func TestCountTakesTheLinearizedPages(t *testing.T) {
	lin := func(n string) string {
		return "<< /Linearized 1 /L 0000000000 /H [100 100] /O 20 /E 100 /N " + n + " /T 100 >>"
	}
	for _, tc := range []struct {
		name, prefix, lin string
		want              int
	}{
		{"the first object", "", lin("105"), 105},
		{"no linearization dictionary", "", "", 100},
		{"after 2 KB", "%" + strings.Repeat("x", 2048) + "\n", lin("105"), 100},
		{"its /N by a reference", "", lin("9 0 R"), 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := skippedFile(tc.prefix, tc.lin)
			if n, ok := qpdfPages(t, data); ok && n != 6 {
				t.Fatalf("qpdf reads %d pages; want 6", n)
			}
			if tc.want == 105 {
				if path, err := exec.LookPath("qpdf"); err == nil {
					file := t.TempDir() + "/file.pdf"
					if err := os.WriteFile(file, data, 0o600); err != nil {
						t.Fatal(err)
					}
					// qpdf --check warns that /N does not match the pages, and exits 3.
					if out, _ := exec.Command(path, "--check", file).CombinedOutput(); !bytes.Contains(out, []byte("File is linearized")) {
						t.Fatalf("qpdf --check: %s", out)
					}
				}
			}
			if n, ok := pdfpages.Count(data); !ok || n != tc.want {
				t.Errorf("Count = %d, %v; want %d", n, ok, tc.want)
			}
		})
	}
}

// FuzzPageCount: no input makes Read panic, take more than linear time, allocate more than a
// bound per byte, or report a count out of its bounds (the data argument); and a file whose
// pages are known (pagedFile's, of pages pages in one of its layouts, with any comment) is
// never counted below them, so that no crafted file is reserved for fewer pages than a reader
// finds. Its seeds are the package's test files and the layouts; the entries under
// testdata/fuzz/FuzzPageCount are the inputs that found bugs.
func FuzzPageCount(f *testing.F) {
	seeds := [][]byte{
		oracleReports(), gluedNode("table"), gluedNode("png"), gluedNode("tiff"),
		kidsArrayFile("9 0 obj [3 0 R 4 0 R 5 0 R] endobj\n"),
		predictedFile("/DecodeParms 40 0 R", func(b []byte) []byte { return pngEncode(b, 7, 1, 3) }, "<< /Predictor 13 /Columns 7 >>"),
		gluedFile("/DecodeParms << /Predictor 2 /BitsPerComponent 4 /Colors 2 /Columns 7 >>", func(b []byte) []byte { return tiffEncode(b, 2, 4, 7) }, ""),
		laterParamsFile("", "/DecodeParms 50 0 R"),
		skippedFile("", "<< /Linearized 1 /L 0000000000 /H [100 100] /O 20 /E 100 /N 105 /T 100 >>"),
	}
	for k, layout := range layouts {
		seeds = append(seeds, pagedFile(layout, 3+k, ""))
	}
	for k, seed := range seeds {
		f.Add(seed, uint8(k), uint8(k), "")
	}
	f.Fuzz(func(t *testing.T, data []byte, pages, layout uint8, comment string) {
		checkRead(t, data)
		n := 1 + int(pages)%40
		known := pagedFile(layouts[int(layout)%len(layouts)], n, comment)
		checkRead(t, known)
		if got, ok := pdfpages.Count(known); ok && got < n {
			t.Fatalf("Count = %d below the %d pages of the %s file", got, n, layouts[int(layout)%len(layouts)])
		}
	})
}

// checkRead reads data and fails when Read's answer is out of its bounds, it took more than
// linear time, or it allocated more than a bound per byte read or inflated.
func checkRead(t *testing.T, data []byte) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	d, ok := pdfpages.Read(data)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if d.Pages < 0 || d.Pages > pdfpages.MaxCount || d.Inflated < 0 || d.Inflated > 32<<20 || (!ok && d != pdfpages.Document{}) {
		t.Fatalf("Read = %+v, %v", d, ok)
	}
	if took > time.Second+time.Duration(len(data)+d.Inflated)*20*time.Microsecond {
		t.Fatalf("Read took %v for %d bytes inflating %d", took, len(data), d.Inflated)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > uint64(16<<20+256*len(data)) {
		t.Fatalf("Read allocated %d bytes for %d", allocated, len(data))
	}
}
