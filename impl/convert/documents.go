package convert

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/pdfpages"
)

// The constants of DocumentTokens, from the providers' documentation of what a PDF sent with a
// request costs. Anthropic puts into the prompt each page's extracted text, "1,500-3,000 tokens
// per page depending on content density", and an image of each page, billed as any image
// (https://platform.claude.com/docs/en/build-with-claude/pdf-support, "Estimate your costs"),
// and accepts at most 600 pages a request (100 when the request's context window is under one
// million tokens; "Check PDF requirements"). OpenAI's vision models get "both the extracted text
// and an image of each page" of a PDF, and the text of other files (.docx, .pptx, .txt; a
// spreadsheet's first rows with a summary), with no page limit stated
// (https://developers.openai.com/api/docs/guides/file-inputs, "How it works").
const (
	// DocumentPageTextTokens is what the text of one page is taken to cost at most.
	DocumentPageTextTokens = 3000
	// MaxDocumentPages is the pages a document whose pages cannot be counted is taken to
	// have: the most Anthropic serves in a request.
	MaxDocumentPages = 600
)

// documentMarkers are, by format, the bytes without which a request of the format holds no
// inline document: chat's file parts and Responses' input_file parts carry it in file_data,
// Messages' document blocks in a base64 source.
var documentMarkers = map[llm.Format][]byte{
	llm.FormatChat:      []byte(`"file_data"`),
	llm.FormatResponses: []byte(`"file_data"`),
	llm.FormatMessages:  []byte(`"document"`),
}

// DocumentTokens is what the documents sent inline in the request v of format f may cost
// beyond their size, for its reservation: their pages (DocumentPages) times
// DocumentPageTextTokens and imageTokens, the most the model's provider bills for one image,
// which an image of a page is, and the bytes their compressed streams inflate to
// (pdfpages.Document.Inflated) at BytesPerToken: a page's text beyond DocumentPageTextTokens
// that the file's size does not show. The reservation counts a document by its size as well.
// A request that cannot hold one (no marker of its format, and no \u escape, which could spell
// one) costs a look-up and allocates nothing; the context-window check does not count this,
// and leaves a document's pages to the provider's count.
func DocumentTokens(f llm.Format, v *jsonview.View, imageTokens int) int64 {
	if v == nil {
		return 0
	}
	d := documents(f, v)
	return d.pages*int64(DocumentPageTextTokens+imageTokens) + (d.inflated+BytesPerToken-1)/BytesPerToken
}

// DocumentPages is the number of pages of the documents sent inline in the request v of format
// f (Messages document blocks with a base64 source, in a message or a tool result; Responses
// input_file parts with file_data; chat file parts with file_data). A PDF's pages are counted
// (pdfpages.Read); a document that is text (valid UTF-8, neither a PDF nor a zip archive such as
// a .docx, .xlsx or .pptx, whose parts may be stored as they are) has none, being counted by its
// size; any other, or a PDF that cannot be read, has MaxDocumentPages, as has a PDF whose
// compressed streams would take what the request's documents inflate past what one file may
// (pdfpages.Budget).
func DocumentPages(f llm.Format, v *jsonview.View) int64 {
	return documents(f, v).pages
}

// documentCounts are what the reservation counts of a request's inline documents: their
// pages, and the bytes their compressed streams inflate to.
type documentCounts struct {
	pages, inflated int64
}

// add adds d to c.
func (c *documentCounts) add(d documentCounts) {
	c.pages += d.pages
	c.inflated += d.inflated
}

// documents counts the inline documents of the request v of format f (see DocumentPages).
func documents(f llm.Format, v *jsonview.View) documentCounts {
	marker := documentMarkers[f]
	if marker == nil {
		return documentCounts{}
	}
	escaped := v.UnicodeEscapes() > 0
	var counts documentCounts
	var budget *pdfpages.Budget // the request's documents inflate at most what one may
	for _, name := range referenceHolders[f] {
		raw, ok := v.Value(name)
		// A member without the marker is read only when it holds a \u escape, which could
		// spell one (the body's escapes may all be elsewhere).
		if !ok || (!bytes.Contains(raw, marker) && !(escaped && bytes.Contains(raw, []byte(`\u`)))) {
			continue
		}
		var value any
		if err := json.Unmarshal(raw, &value); err != nil {
			continue // the validator's to refuse
		}
		if budget == nil {
			budget = new(pdfpages.Budget)
		}
		counts.add(documentsIn(f, value, budget))
	}
	return counts
}

// documentsIn counts the inline documents in value, wherever they are in it, their compressed
// streams inflating within budget.
func documentsIn(f llm.Format, value any, budget *pdfpages.Budget) documentCounts {
	var counts documentCounts
	switch x := value.(type) {
	case []any:
		for _, e := range x {
			counts.add(documentsIn(f, e, budget))
		}
	case map[string]any:
		if data, ok := inlineDocument(f, x); ok {
			counts.add(documentOf(data, budget))
		}
		for _, e := range x {
			counts.add(documentsIn(f, e, budget))
		}
	}
	return counts
}

// inlineDocument is the data of the inline document that x is, as it is sent (base64 or a data
// URL), and whether x is one.
func inlineDocument(f llm.Format, x map[string]any) (string, bool) {
	typ, _ := x["type"].(string)
	switch f {
	case llm.FormatMessages:
		src, _ := x["source"].(map[string]any)
		if data, ok := src["data"].(string); ok && typ == "document" && src["type"] == "base64" {
			return data, true
		}
	case llm.FormatResponses:
		if data, ok := x["file_data"].(string); ok && typ == "input_file" {
			return data, true
		}
	case llm.FormatChat:
		file, _ := x["file"].(map[string]any)
		if data, ok := file["file_data"].(string); ok && typ == "file" {
			return data, true
		}
	}
	return "", false
}

// documentOf counts the document whose data is data: base64, or a data URL
// ("data:application/pdf;base64,...", the marker in any case; one that is not base64 holds its
// bytes as they are), its
// compressed streams inflating within budget (past it, its pages cannot be counted).
func documentOf(data string, budget *pdfpages.Budget) documentCounts {
	encoded := true
	if rest, ok := strings.CutPrefix(data, "data:"); ok {
		params, payload, _ := strings.Cut(rest, ",")
		semi := strings.LastIndexByte(params, ';')
		data, encoded = payload, semi >= 0 && strings.EqualFold(params[semi+1:], "base64")
	}
	decoded := []byte(data)
	if encoded {
		var err error
		if decoded, err = base64.StdEncoding.DecodeString(data); err != nil {
			return documentCounts{pages: MaxDocumentPages}
		}
	}
	if d, ok := pdfpages.ReadWithin(decoded, budget); ok {
		return documentCounts{pages: int64(d.Pages), inflated: int64(d.Inflated)}
	}
	if utf8.Valid(decoded) && !bytes.Contains(decoded[:min(len(decoded), 1024)], []byte("%PDF-")) && !bytes.HasPrefix(decoded, []byte("PK\x03\x04")) {
		return documentCounts{}
	}
	return documentCounts{pages: MaxDocumentPages}
}
