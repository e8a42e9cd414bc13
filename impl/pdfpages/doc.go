// Package pdfpages counts the pages of a PDF the way a reservation needs: cheaply, safely on
// hostile input, and never below what a provider's renderer would find. A provider bills a
// PDF sent with a request by its pages (Anthropic puts each page's text and an image of it into
// the prompt, https://platform.claude.com/docs/en/build-with-claude/pdf-support; OpenAI "the
// extracted text and an image of each page", https://developers.openai.com/api/docs/guides/file-inputs),
// not by its bytes: a compact or crafted PDF holds many pages in few bytes.
//
// Read reads the file as bytes, not as a PDF parser would: every page object (a dictionary
// with /Type /Page) is counted wherever it appears, in the file or inside an object stream
// (compressed with FlateDecode, inflated under a hard output bound), and so is the largest
// /Count a page tree node states (and the /N of a linearization dictionary), and so are the
// leaves of the page tree, walked from the objects a /Pages entry refers to (pagetree.go: readers take each leaf for a page, typed,
// with contents or neither, whatever /Count says). It also reports what the compressed
// streams other than images inflate to (Document.Inflated): a page's content stream can show
// far more text, which the provider extracts and bills, than its compressed bytes. Anything that makes the count
// uncertain (no PDF header, encryption, a compressed stream with another filter, an object
// stream under a predictor that cannot be undone, the inflate bound reached) is reported, so that the caller
// assumes the most pages a provider accepts.
// Text that only looks like a page object (in a string, a comment or a stream's data) counts
// too: the count errs upwards, which costs a reservation nothing that is not released.
package pdfpages
