package web

import "strings"

// browserSummary names the browser and the system of a User-Agent header as a person says
// them ("Chrome on Linux", "Safari on iOS", "Firefox on Windows"); the pages show it with the
// header itself in its title. It reads the usual tokens only: a header it does not know is
// summarised by its first product ("curl", "Go-http-client"), and an empty one as "unknown
// browser".
func browserSummary(ua string) string {
	ua = strings.TrimSpace(ua)
	if ua == "" {
		return "unknown browser"
	}
	browser := ""
	for _, b := range []struct{ token, name string }{
		{"Edg/", "Edge"}, {"EdgA/", "Edge"}, {"EdgiOS/", "Edge"}, {"OPR/", "Opera"}, {"SamsungBrowser/", "Samsung Internet"},
		{"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"}, {"HeadlessChrome/", "Headless Chrome"}, {"CriOS/", "Chrome"},
		{"Chromium/", "Chromium"}, {"Chrome/", "Chrome"}, {"Version/", "Safari"},
	} {
		if strings.Contains(ua, b.token) && (b.name != "Safari" || strings.Contains(ua, "Safari/")) {
			browser = b.name
			break
		}
	}
	system := ""
	for _, s := range []struct{ token, name string }{
		{"iPhone", "iOS"}, {"iPad", "iPadOS"}, {"Android", "Android"}, {"CrOS", "ChromeOS"}, {"Windows", "Windows"},
		{"Macintosh", "macOS"}, {"Mac OS X", "macOS"}, {"Linux", "Linux"}, {"FreeBSD", "FreeBSD"},
	} {
		if strings.Contains(ua, s.token) {
			system = s.name
			break
		}
	}
	if browser == "" {
		product, _, _ := strings.Cut(ua, " ")
		product, _, _ = strings.Cut(product, "/")
		if product == "" || product == "Mozilla" {
			product = "unknown browser"
		}
		browser = product
	}
	if system == "" {
		return browser
	}
	return browser + " on " + system
}
