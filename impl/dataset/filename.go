package dataset

import (
	"path"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// nameMax is the longest dataset name (nameRE).
const nameMax = 64

// NameFor derives a dataset name from an everyday file name, for an upload that names
// none: the name without its directory and its last extension, as it is when it is already a
// dataset name (letters, digits, '_' and '-', starting with a letter or a digit, at most 64:
// the grammar of ValidName, not loosened); otherwise with accents taken off its letters,
// lowercased, each run of other characters made one '_' (a run of '-' alone stays '-'),
// nothing but a letter or a digit at either end, and cut at 64 characters. "Q3 sales.csv" is
// q3_sales, "Résumé (final).csv" resume_final; a name with no letter or digit left is
// "dataset". The web console's upload and `tollgate admin dataset put` name a dataset so when
// they are given no name, and impl/web's static/dataset-upload.js applies the same rule to show
// the name before the upload.
func NameFor(fileName string) string {
	base := path.Base(strings.ReplaceAll(fileName, "\\", "/"))
	if base == "." || base == "/" {
		base = ""
	}
	stem := strings.TrimSuffix(base, path.Ext(base))
	if ValidName(stem) {
		return stem
	}
	var plain strings.Builder
	for _, r := range norm.NFKD.String(stem) {
		if !unicode.Is(unicode.M, r) {
			plain.WriteRune(r)
		}
	}
	var b strings.Builder
	sep := ""
	for _, r := range strings.ToLower(plain.String()) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if b.Len() > 0 && sep != "" {
				b.WriteString(sep)
			}
			sep = ""
			b.WriteRune(r)
			continue
		}
		if r == '-' && (sep == "" || sep == "-") {
			sep = "-"
		} else {
			sep = "_"
		}
	}
	name := b.String()
	if len(name) > nameMax {
		name = strings.TrimRight(name[:nameMax], "_-")
	}
	if name == "" {
		return "dataset"
	}
	return name
}
