package pdfpages

import "bytes"

// linearizedWindow is how far after the PDF header a linearization dictionary's object may
// start: qpdf looks for it in the file's first 1,024 bytes, pdf.js and PDFium take the file's
// first object.
const linearizedWindow = 1024

// linearizedPages is the number of pages (/N) a linearization dictionary states, at most
// MaxCount: the largest /N, a direct integer, of a dictionary that names /Linearized and
// follows an "obj" within linearizedWindow bytes of data[at] (its header). pdf.js takes a
// linearized file's /N for its number of pages (PDFDocument.numPages), and keeps it when a
// page is found at its last index, which a page tree node's /Count can skip to (Catalog's
// getPageDict skips a node by its /Count, whatever leaves it holds); PDFium, loading a file
// progressively (as a browser's viewer does), takes /N whatever the page tree holds. A
// reader shows the pages of a file whose linearization dictionary no longer describes it (an
// incremental update after it) by its page tree, whose pages the count finds besides.
func linearizedPages(data []byte, at int) int {
	window := data[:min(len(data), at+linearizedWindow)]
	most := 0
	for i := at; ; i += len("obj") {
		k := bytes.Index(window[i:], []byte("obj"))
		if k < 0 {
			return most
		}
		i += k
		dict := data[i+len("obj") : min(len(data), i+len("obj")+dictWindow)]
		most = max(most, linearizationCount(dict))
	}
}

// linearizationCount is the /N of the dictionary that b starts with (after whitespace and
// comments), when it names /Linearized and gives /N as a direct integer (a reference, which
// readers do not follow there, or anything else is none).
func linearizationCount(b []byte) int {
	p := parser{b: b}
	p.space()
	if !p.at("<<") {
		return 0
	}
	p.i += 2
	n, linearized := 0, false
	for {
		p.space()
		if p.at(">>") || p.i >= len(p.b) || p.b[p.i] != '/' {
			break
		}
		key, end := readName(p.b, p.i)
		p.i = end
		p.space()
		linearized = linearized || key.is("Linearized")
		if _, _, indirect := reference(p.b, p.i); key.is("N") && !indirect && p.i < len(p.b) && digit(p.b[p.i]) {
			n = readInt(p.b, p.i)
		}
		if !p.value(0) {
			break
		}
	}
	if !linearized {
		return 0
	}
	return n
}
